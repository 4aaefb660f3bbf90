"""Which extra flags of a Beam command (`preprocess`, `batch-recommend`) Beam knows.

argparse hands the flags a command does not declare to Beam's
`PipelineOptions` (`--runner`, `--direct_num_workers`, Dataflow's `--project`,
...). Beam itself drops what none of its options parses, with a warning only
logs show; here those flags are refused like any other unknown flag, before
anything runs. Beam's own parser decides: the options of every
`PipelineOptions` subclass loaded, the runners' included.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib

# Modules whose PipelineOptions subclasses are not loaded by Beam's core.
RUNNER_OPTIONS = (
    "apache_beam.runners.portability.flink_runner",
    "apache_beam.runners.portability.spark_runner",
)


def unknown(args: list[str]) -> list[str]:
    """The part of `args` no Beam pipeline option parses (flags and values)."""
    from apache_beam.options import pipeline_options

    for module in RUNNER_OPTIONS:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
    classes = {}  # As PipelineOptions.get_all_options: the last of each name.
    for cls in pipeline_options.PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)
    _, rest = parser.parse_known_args(args)
    return rest


def check(command: str, args: list[str], own_flags: list[str]) -> None:
    """ValueError naming the flags of `args` that neither `command` (whose
    flags are `own_flags`) nor Beam knows, with the nearest own flag."""
    rest = unknown(args)
    if not rest:
        return
    hints = []
    for token in rest:
        if not token.startswith("-"):
            continue
        name = token.split("=", 1)[0]
        near = difflib.get_close_matches(name.replace("_", "-"), own_flags, n=1)
        if near:
            hints.append(f"{name}: did you mean {near[0]}?")
    raise ValueError(
        f"unrecognized arguments: {' '.join(rest)} (neither `genni {command}`'s "
        "flags nor Beam's pipeline options)"
        + ("; " + "; ".join(hints) if hints else "")
    )
