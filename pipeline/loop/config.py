"""The pipeline file: its sections, checked before any step writes.

    input: logs/*.json.gz          # review logs, any format `genni preprocess` reads
    workdir: work                  # data/, tune/, runs/ and models/ go here
    preprocess: {min_count: 5}     # `genni preprocess` settings (optional;
                                   #   split: time, test_days: 7 for the loop;
                                   #   item_attributes: the items file)
    tune: {max_trials: 8}          # optional: search first, train the best found
    train: {sampler: genni}        # `genni train` settings (optional; preset: paper;
                                   #   warm_start: served for the nightly loop)
    export: {k: 10, max_regression: 0.0, split: valid}

A pipeline is this mapping (read from YAML or JSON by `load_config`, or built
in Python and checked by `checked`); `genni.pipeline.loop.run_pipeline` runs it.
"""

from __future__ import annotations

import dataclasses

from genni.components import schema
from genni.components.settings import (
    NON_NEGATIVE,
    Settings,
    at_least,
    read_file,
    setting,
)

SERVED = "served"  # `train: {warm_start: served}`
SECTIONS = ("input", "workdir", "preprocess", "tune", "train", "export")
SETTINGS_SECTIONS = ("preprocess", "tune", "train", "export")


def load_config(path: str, needs: tuple[str, ...] = ("input", "workdir")) -> dict:
    """The pipeline file (YAML or JSON), checked (`checked`)."""
    return checked(read_file(path, "--config"), needs, repr(path))


def checked(
    config: dict,
    needs: tuple[str, ...] = ("input", "workdir"),
    where: str = "the pipeline",
) -> dict:
    """`config` itself, once every section is checked: unknown sections are
    errors; `needs`: the sections it must have (paths); each settings section
    a mapping whose every setting is known and valid (`check`). ValueError
    names what is wrong. `where`: how the error names the pipeline."""
    unknown = sorted(set(config) - set(SECTIONS))
    if unknown:
        raise ValueError(
            f"Unknown sections in {where}: {', '.join(unknown)} "
            f"(known: {', '.join(SECTIONS)})."
        )
    for name in needs:
        if not isinstance(config.get(name), str):
            raise ValueError(f"{where} needs `{name}:` (a path).")
    for name in SETTINGS_SECTIONS:
        value = config.get(name)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"`{name}:` in {where} must be a mapping of settings.")
    check(config)
    return config


@dataclasses.dataclass(frozen=True)
class ExportConfig(Settings):
    """The `export:` section: the guarded export of each new run."""

    KIND = "`export:` settings"

    k: int = setting(10, "Items per answer.", check=at_least(1))
    max_regression: float = setting(
        0.0, "NDCG@10 points a candidate may lose.", check=NON_NEGATIVE
    )
    split: str = setting(
        schema.VALID, "Where the guard compares.", choices=(schema.VALID, schema.TEST)
    )
    candidates: str | None = setting(
        None, "The ranking rule (default: the run's).", choices=(None, "new", "all")
    )
    baseline: str = setting(
        "popular",
        "What a candidate must beat besides the served version: 'popular', the "
        "popularity ranking of its training events (it serves while no model "
        "has beaten it), or 'none'.",
        choices=("popular", "none"),
    )
    refit: bool = setting(
        False,
        "Publish a refit: the judged run's settings and best epoch count, "
        "trained again on every event of the input (the windows included; "
        "needs `preprocess: {split: time}`), judged by the run it refits.",
    )


def check(config: dict) -> None:
    """Every section's settings, read and checked before any step writes:
    a wrong name, type or value is refused here, not steps later."""
    from genni.pipeline.preprocess.config import PreprocessConfig
    from genni.pipeline.training.config import TuneConfig

    export_settings = ExportConfig.from_dict(config.get("export") or {})
    if export_settings.refit and (config.get("preprocess") or {}).get("split") != (
        "time"
    ):
        raise ValueError(
            "`export: refit` needs `preprocess: {split: time}`: a refit learns the "
            "events of the split's windows."
        )
    if config.get("tune") is not None:
        TuneConfig.from_dict(config["tune"])
    preprocess = dict(config.get("preprocess") or {})
    for name in ("input", "output", "overwrite", "previous"):
        if name in preprocess:
            raise ValueError(f"`preprocess: {name}` is set by the pipeline.")
    known = {f.name for f in dataclasses.fields(PreprocessConfig)}
    _check_names("preprocess", preprocess, tuple(sorted(known)))
    PreprocessConfig(input="", output="", **preprocess)
    train_config(config, "", {})


def _check_names(section: str, values: dict | None, known: tuple) -> None:
    unknown = sorted(set(values or {}) - set(known))
    if unknown:
        raise ValueError(
            f"Unknown `{section}:` settings: {', '.join(unknown)} "
            f"(known: {', '.join(known)})."
        )


def train_config(config: dict, data: str, tuned: dict, warm_start: str | None = None):
    """The run the train step trains (output unset): the `train:` section
    (its `preset:` as in `genni train`, by default the recommended one), then
    the tuned settings; `warm_start`: the run `warm_start: served` resolved to
    (None: from scratch)."""
    from genni.pipeline.training import config as configs
    from genni.pipeline.training.config import TrainConfig

    section = dict(config.get("train") or {})
    if section.pop("warm_start", None) not in (None, SERVED):
        raise ValueError(
            f"`train: warm_start` takes `{SERVED}` (the run behind the version "
            "serving now), or is left out."
        )
    if warm_start:
        section["warm_start"] = warm_start
    settings = configs.settings_with_preset({**section, **tuned}, data=data)
    for name in ("data", "output"):
        if name in settings:
            raise ValueError(f"`train: {name}` is set by the pipeline.")
    return TrainConfig.from_dict({"data": data, "output": "", **settings})
