"""The names of the research tooling's runs (`benchmarks/reproduce.py`, the
report's archive): for people, beside the run keys that identify runs
(`genni.pipeline.training.keys`)."""

from __future__ import annotations

import os

from genni.pipeline.training.config import PretrainConfig

# `genni pretrain`'s length, which pre-training names leave out.
DEFAULT_PRETRAIN_EPOCHS = PretrainConfig.epochs


def variant_run_name(dataset: str, variant: str, seed: int) -> str:
    """The directory name of a `benchmarks/reproduce.py` run."""
    return f"{dataset}_{variant}_s{seed}"


def pretrain_run_name(
    dataset: str, seed: int, epochs: int = DEFAULT_PRETRAIN_EPOCHS
) -> str:
    """The directory name of an S3-Rec pre-training of `benchmarks/reproduce.py`:
    `<dataset>_pretrain<epochs>_s<seed>`, or `<dataset>_pretrain_s<seed>` at the
    default length (the name of the runs archived before lengths varied), so
    that pre-trainings of different lengths never share a directory."""
    if epochs == DEFAULT_PRETRAIN_EPOCHS:
        return variant_run_name(dataset, "pretrain", seed)
    return variant_run_name(dataset, f"pretrain{epochs}", seed)


def finetune_variant_name(
    variant: str, seed: int, pretrain_epochs: int, pretrain_seed: int | None = None
) -> str:
    """A fine-tuned variant's name for `variant_run_name`, with its pre-training
    when that is not the default (`DEFAULT_PRETRAIN_EPOCHS` epochs, the run's
    own seed): `<variant>_p<epochs>[from<seed>]`, `from` naming a pre-training
    of another seed that all seeds share."""
    shared = pretrain_seed is not None and pretrain_seed != seed
    if pretrain_epochs == DEFAULT_PRETRAIN_EPOCHS and not shared:
        return variant
    return f"{variant}_p{pretrain_epochs}" + (f"from{pretrain_seed}" if shared else "")


def archive_name(prefix: str, run_dir: str) -> str:
    """An archived run's name: its directory's, after its dataset's `prefix`."""
    name = os.path.basename(os.path.normpath(run_dir))
    return name if name.startswith(prefix + "_") else f"{prefix}_{name}"
