"""Shared bits of the benchmark scripts: paths, environment, result files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As the `genni` command.

ROOT = Path(__file__).resolve().parents[1]
# The research tooling (`research/`) lives in the clone, not in the package;
# appended, so that `genni` is still the installed package.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
# The project's record of finished runs (`research.records`), and the data
# sets its runs are told apart by, by their users.
RECORD = RESULTS / "runs.jsonl"
DATASETS = {22363: "Beauty", 19412: "Toys", 943: "ml-100k"}


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def beauty_data(tmp: str, *, attributes: bool = False, synthetic: bool = False) -> str:
    """Preprocess ../shared/data/Beauty.txt (and its item attributes when
    `attributes`) into `tmp`, in memory; returns the data dir. Without Beauty,
    the project's synthetic log when `synthetic`, else FileNotFoundError."""
    from genni.pipeline.preprocess import inmemory
    from genni.pipeline.preprocess.config import PreprocessConfig

    source = SHARED_DATA / "Beauty.txt"
    item_attributes = None
    if not source.exists():
        if not synthetic:
            raise FileNotFoundError(f"{source} (pass --data)")
        from genni.pipeline.preprocess import synthetic as synth

        source = os.path.join(tmp, "reviews.json.gz")
        synth.write_log(synth.SyntheticConfig(), source)
    elif attributes:
        item_attributes = str(SHARED_DATA / "Beauty_item2attributes.json")
    out = os.path.join(tmp, "data")
    inmemory.run(
        PreprocessConfig(input=str(source), output=out, item_attributes=item_attributes)
    )
    return out


def training_of(config: dict) -> str | None:
    """Which training a run's settings are, by loss and negatives: "softmax"
    (the full softmax), "recommended" (GenNi's 64 negatives under a sampled
    softmax) or "paper" (one GenNi negative under BCE); None for any other.
    Alpha and the rest of the draw are the caller's to check."""
    if config.get("loss") == "softmax":
        return "softmax"
    if config.get("sampler") != "genni":
        return None
    if config.get("loss") == "sampled_softmax" and config.get("num_negatives") == 64:
        return "recommended"
    if config.get("loss") == "bce" and config.get("num_negatives") == 1:
        return "paper"
    return None


def free_port() -> int:
    """A free local TCP port (for a `genni serve` the benchmark starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mean_std(values: list[float], plus_minus: str = "±") -> str:
    """'m ± s' over seeds to 2 decimals; a single value alone."""
    import statistics

    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} {plus_minus} {statistics.stdev(values):.2f}"


def write_results(name: str, results: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)
    print(f"Results: {RESULTS / name}.json and .md")


def timing_parser(doc: str, rounds: int) -> argparse.ArgumentParser:
    """The options of a side-by-side step-timing benchmark."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="Preprocessed dataset dir.")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--steps", type=int, default=10)
    return parser


def time_side_by_side(
    doc: str, configs: dict[str, dict], rounds: int, argv: list[str] | None
) -> tuple[argparse.Namespace, dict[str, list[float]], dict[str, float]]:
    """A step-timing benchmark's run: its options (`timing_parser`), then the
    training steps of `configs` timed side by side on `--data` (default:
    Beauty, else the synthetic log). Returns (args, seconds per round, median)."""
    import statistics
    import tempfile

    from research import speed

    args = timing_parser(doc, rounds=rounds).parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data or beauty_data(tmp, synthetic=True)
        times = speed.step_times(data_dir, configs, args.rounds, args.steps)
    return args, times, {name: statistics.median(t) for name, t in times.items()}


def layout_ratio_rows(
    median: dict[str, float], names, base: str
) -> tuple[list[str], dict[str, float]]:
    """Table rows "| name | layout | ms / step | x base |" of a side-by-side
    timing keyed "name, layout" (packed and unpacked), and the ratios."""
    lines, ratios = [], {}
    for layout in ("packed", "unpacked"):
        reference = median[f"{base}, {layout}"]
        for name in names:
            t = median[f"{name}, {layout}"]
            ratios[f"{name}, {layout}"] = t / reference
            lines.append(
                f"| {name} | {layout} | {1000 * t:.0f} | {t / reference:.2f} |"
            )
    return lines, ratios


def timing_head(
    args: argparse.Namespace,
    title: str,
    batches: str,
    columns: tuple[str, ...],
    data: bool = True,
) -> list[str]:
    """A step-timing benchmark's Markdown up to its table's rows: `title`, how
    it was timed (`batches`, e.g. "Batches of 256", then `--steps`, `--rounds`
    and, with `data`, the data set) and the header of a table of `columns`."""
    where = f"; data `{args.data or 'Beauty'}`." if data else "."
    return [
        title,
        "",
        f"{batches}, {args.steps} steps per configuration and round, median of "
        f"{args.rounds} interleaved rounds in one process{where}",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]


def publish_layout_ratios(
    name: str,
    lines: list[str],
    times: dict[str, list[float]],
    median: dict[str, float],
    names,
    base: str,
    target: float,
    worst_of: list[str] | None = None,
) -> None:
    """`publish` a side-by-side timing keyed "name, layout": `lines`, then the
    rows of `layout_ratio_rows` and the largest ratio (of `worst_of`, default
    all) against `target`."""
    rows, ratios = layout_ratio_rows(median, names, base)
    worst = max(ratios[key] for key in worst_of or ratios)
    lines = [
        *lines,
        *rows,
        "",
        f"Largest ratio {worst:.2f} (target <= {target:g}: "
        f"{'met' if worst <= target else 'NOT met'}).",
    ]
    publish(
        name, lines, {"seconds_per_step": times, "median": median, "ratios": ratios}
    )


def publish(name: str, lines: list[str], results: dict) -> None:
    """Print a benchmark's Markdown, ending with the command that ran it, and
    write it with `results` (plus the machine) as results/<name>.json / .md."""
    script = os.path.basename(sys.argv[0])
    command = " ".join([f"python benchmarks/{script}", *sys.argv[1:]])
    markdown = "\n".join([*lines, "", f"Command: `{command}`", ""])
    print(markdown)
    write_results(name, dict(results, machine=machine()), markdown)
