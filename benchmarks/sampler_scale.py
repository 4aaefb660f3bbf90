"""GenNi as the catalog grows: step time beside uniform's, and the drawn law.

Part 1 times training steps side by side (`speed.step_times`) on the packed
batches of one dataset, over a catalog grown to 10^4, 10^5 and 10^6 items (the
embedding table and the samplers sized to it; each size in its own process):
uniform BCE (the paper's baseline), GenNi at beta 1 where it still runs, the
paper's GenNi with its candidates capped (`--max-candidates`), the recommended
preset (capped at 16,384) and the uniform sampled softmax with as many
negatives.

Part 2 measures how far a capped draw's law is from the exact one, Q(i) =
softmax(alpha * h . e_i) over all items, on fixed queries: the total-variation
distance TV = 1/2 sum_i |Q_M(i) - Q(i)|. A capped draw scores a uniform subset
of M items, so its law is Q_M(i) = (M / N) E[exp(s_i) / (exp(s_i) + Z')], Z'
the mass of M - 1 other items drawn at random; the expectation is taken over R
draws of Z' (no sampling noise of single draws). Two sources of scores:
Gaussian embeddings with the logit spread of a trained model (std `--logit-std`,
2.4 for the recommended preset on Beauty), at 10^4, 10^5 and 10^6 items; and,
with `--run`, a trained run's own queries and items, at the fractions M / N of
those sizes, and at its own catalog.

The two-level draw (`--clusters`, C = `default_clusters(N)`: 1,024 at 10^6
items) is timed and measured the same way: its law, R candidates from the
k-means clusters' masses resampled by their exact scores, is
`law.resampled_law` over the clusters that `clusters.lloyd` finds on the same
items.

    python benchmarks/sampler_scale.py [--data DIR] [--run RUN_DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from _common import beauty_data, machine, write_results

from genni.components.samplers.clusters import default_clusters
from genni.pipeline.training.config import PRESETS
from research.commands import relative, shell_line

SIZES = (10_000, 100_000, 1_000_000)
CAP = PRESETS["recommended"]["max_candidates"]  # The recommended preset's cap.
BUDGET = PRESETS["recommended"]["draw_budget"]  # And its budget of scores a step.
SMALL_CAP = 4_096
CAPS = (SMALL_CAP, 8_192, CAP)  # The caps timed and whose law is measured.
# The caps whose law with successor candidates is measured on a trained run: a
# V' of 256 per position too.
SUCCESSOR_CAPS = (256, *CAPS)
RECOMMENDED = "recommended preset (GenNi SSM k64)"
EXACT_UP_TO = 100_000  # Beta 1 beyond: minutes per step on this CPU.
UNIFORM = "uniform BCE k1"
# (M, G) of the draws timed with a fresh V' of M items every G positions.
GROUPED = (
    (16_384, 50),
    (8_192, 50),
    (8_192, 1_024),
    (4_096, 50),
    (2_048, 10),
    (1_024, 10),
)
# S of the draws that also score each position's input item and its S most
# frequent successors (`--successors`), and the (M, G) they are timed at (G
# None: one V' a batch; 1: one V' a position).
SUCCESSORS = 16
WITH_SUCCESSORS = ((4_096, None), (4_096, 50), (1_024, 1), (256, 1))
# R of the two-level draws whose law is measured.
CLUSTER_SAMPLES = (64, 256)
# The exact law's mass in a query's top clusters, measured at these counts.
TOP_CLUSTERS = (1, 32)
# Part 2's queries, draws of the other candidates' mass, and Gaussian logit std.
DEFAULTS = {"queries": 16, "draws": 32, "logit_std": 2.4}


def configs(num_items: int) -> dict[str, dict]:
    """What Part 1 times at a catalog of `num_items`."""
    paper = dict(sampler="genni", alpha=2.5, loss="bce")
    recommended = dict(
        sampler="genni", alpha=1.0, num_negatives=64, loss="sampled_softmax"
    )
    found = {UNIFORM: dict(sampler="uniform")}
    if num_items <= EXACT_UP_TO:
        found["GenNi BCE k1, beta 1"] = paper
    for cap in CAPS:
        found[f"GenNi BCE k1, M {cap:,}"] = dict(paper, max_candidates=cap)
    for cap, group in GROUPED:
        found[f"GenNi BCE k1, M {cap:,}, V' per {group:,}"] = dict(
            paper, max_candidates=cap, beta_group=group
        )
    for cap, group in WITH_SUCCESSORS:
        per = f", V' per {group:,}" if group else ""
        found[f"GenNi BCE k1, M {cap:,}{per}, successors {SUCCESSORS}"] = dict(
            paper, max_candidates=cap, beta_group=group, successors=SUCCESSORS
        )
    c = default_clusters(num_items)
    found[f"GenNi BCE k1, {c:,} clusters"] = dict(paper, clusters=c)
    # The preset as `genni train` runs it: its budget sets M from the batches.
    found[RECOMMENDED] = dict(recommended, max_candidates=CAP, draw_budget=BUDGET)
    found[f"GenNi SSM k64, M {CAP:,}"] = dict(recommended, max_candidates=CAP)
    found["uniform SSM k64"] = dict(
        sampler="uniform", num_negatives=64, loss="sampled_softmax"
    )
    return {name: dict(c, pack=True) for name, c in found.items()}


def chosen(num_items: int, only: list[str] | None) -> dict[str, dict]:
    """`configs`, cut to uniform BCE (the baseline) and those whose name holds
    one of `only` (None: all)."""
    found = configs(num_items)
    if not only:
        return found
    return {
        name: c
        for name, c in found.items()
        if name == UNIFORM or any(word in name for word in only)
    }


def step_point(
    data: str, num_items: int, rounds: int, steps: int, only: list[str] | None
) -> dict:
    """Run in a child process: Part 1 at one catalog size."""
    from genni.pipeline.training.config import TrainConfig
    from genni.pipeline.training.data import Dataset
    from research import speed

    times = speed.step_times(
        data, chosen(num_items, only), rounds, steps, verbose=False, num_items=num_items
    )
    ms = {name: 1000 * statistics.median(t) for name, t in times.items()}
    preset = TrainConfig.of(data=data, output="", **configs(num_items)[RECOMMENDED])
    positions = Dataset.open(data).positions_per_step(preset.batch_size)
    budgeted = preset.draw_candidates(num_items, positions)
    return {
        "items": num_items,
        "ms_per_step": ms,
        "positions_per_step": positions,
        "recommended_candidates": budgeted or num_items,
    }


def tv_distance(logits, cap: int, draws: int) -> float:
    """Mean TV between the capped and the exact law over the rows of `logits`."""
    from research import law

    capped = law.capped_law(logits, cap, draws)
    return float(law.total_variation(capped, law.softmax(logits)).mean())


def law_gaussian(num_items: int, args) -> dict:
    """Part 2 on Gaussian embeddings of logit std `args.logit_std`."""
    import numpy as np

    rng = np.random.default_rng(0)
    d = 64
    items = (rng.standard_normal((num_items, d)) / np.sqrt(d)).astype(np.float32)
    queries = rng.standard_normal((args.queries, d)) * args.logit_std
    logits = queries @ items.T
    return law_point(logits, num_items, args) | cluster_law(queries, items, args)


def cluster_law(queries, items, args) -> dict:
    """TV of the two-level draw over `items` [N, d] to the exact law, for
    queries [rows, d] with alpha in them, at each R of CLUSTER_SAMPLES."""
    import numpy as np
    import tensorflow as tf

    from genni.components.samplers import clusters
    from genni.components.samplers.draws import two_level
    from research import law

    c = default_clusters(len(items))
    table = tf.constant(items, tf.float32)
    seed = tf.constant([0, 1])
    start = clusters.initial_centroids(table, c, seed)
    centroids, assignment = clusters.lloyd(table, start, two_level.INITIAL_LLOYD, seed)
    logits = queries @ items.T
    proposal = (queries @ centroids.numpy().T)[:, assignment.numpy()]
    exact = law.softmax(logits)
    # The exact law's mass in each query's most likely clusters (by centroid).
    mass = np.stack([np.bincount(assignment.numpy(), p, c) for p in exact])
    ranked = np.argsort(-(queries @ centroids.numpy().T), axis=1)
    point = {"clusters": c}
    for top in TOP_CLUSTERS:
        held = np.take_along_axis(mass, ranked[:, :top], axis=1).sum(axis=1)
        point[f"mass_top{top}_clusters"] = float(np.median(held))
    for r in CLUSTER_SAMPLES:
        drawn = law.resampled_law(logits, proposal, r, args.draws)
        point[f"tv_C_R{r}"] = float(law.total_variation(drawn, exact).mean())
    return point


def law_point(
    logits, num_items: int, args, share_of: int | None = None, extras=None
) -> dict:
    """TV at each cap; with `share_of`, each cap scaled to the share of the
    catalog it would be at `share_of` items (a cap at or above the catalog
    does not bite: TV 0, the exact law). With `extras` ([rows, N] bool: each
    query's input item and successors), also the TV of each capped draw with
    them (`law.successor_law`) and the exact law's mass on them."""
    import math

    import numpy as np

    from research import law

    exact = law.softmax(logits)
    point = {"items": num_items, "top1_prob": float(np.median(exact.max(axis=1)))}
    if share_of is not None:
        point["as_if_items"] = share_of

    def scaled(cap: int) -> int:
        if share_of is None:
            return cap
        return max(2, math.ceil(cap * num_items / share_of))

    for cap in CAPS:
        point[f"tv_M{cap}"] = tv_distance(logits, scaled(cap), args.draws)
    for cap in SUCCESSOR_CAPS if extras is not None else ():
        if f"tv_M{cap}" not in point:
            point[f"tv_M{cap}"] = tv_distance(logits, scaled(cap), args.draws)
        drawn = law.successor_law(logits, extras, scaled(cap), args.draws)
        point[f"tv_M{cap}_succ"] = float(law.total_variation(drawn, exact).mean())
    if extras is not None:
        point["mass_succ"] = float(np.median((exact * extras).sum(axis=1)))
    return point


def law_of_run(run: str, args) -> list[dict]:
    """Part 2 on a trained run's queries (validation users) and items, at the
    share M / N of its catalog that each size of `args.sizes` would have."""
    import numpy as np

    from genni.components import schema
    from genni.pipeline.training import data, model

    config = model.read_config(run)
    dataset = data.Dataset.open(config.data)
    loaded = model.load_run(run, dataset=dataset)
    batch = next(iter(dataset.batches(schema.VALID, args.queries)))
    queries = loaded.query_embeddings(batch["input_ids"]).numpy()
    if queries.ndim == 3:
        queries = queries[:, -1]
    items = loaded.item_embeddings.numpy()[1:]
    logits = config.sampler.alpha * queries @ items.T
    # Each query's input item (the last of its history) and its successors.
    previous = batch["input_ids"].numpy()[:, -1]
    table = dataset.successor_table(SUCCESSORS)
    ids = np.concatenate([previous[:, None], table[previous]], axis=1)
    extras = np.zeros(logits.shape, dtype=bool)
    rows = np.repeat(np.arange(len(ids)), ids.shape[1])
    extras[rows[ids.ravel() > 0], ids.ravel()[ids.ravel() > 0] - 1] = True
    own = law_point(logits, len(items), args, extras=extras)
    own |= cluster_law(config.sampler.alpha * queries, items, args)
    return [
        law_point(logits, len(items), args, size, extras) for size in args.sizes
    ] + [own]


def child(argv: list[str]) -> dict:
    """Run `--step-point N` or `--law-point N` in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True
    )
    if out.returncode:
        sys.exit(f"{' '.join(argv)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="Preprocessed dataset dir.")
    parser.add_argument("--run", default=None, help="A trained run for Part 2.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--queries", type=int, default=DEFAULTS["queries"])
    parser.add_argument("--draws", type=int, default=DEFAULTS["draws"])
    parser.add_argument("--logit-std", type=float, default=DEFAULTS["logit_std"])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--skip-steps", action="store_true")
    parser.add_argument("--skip-law", action="store_true", help="No Part 2.")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="WORD",
        help="Part 1 times only uniform BCE and the draws whose name holds a WORD "
        '("V\' per", clusters, "M 8,192").',
    )
    parser.add_argument("--name", default="sampler_scale", help="Results file name.")
    parser.add_argument("--step-point", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--law-point", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step_point:
        point = step_point(
            args.data, args.step_point, args.rounds, args.steps, args.only
        )
        print(json.dumps(point))
        return 0
    if args.law_point:
        print(json.dumps(law_gaussian(args.law_point, args)))
        return 0

    shared = [
        "--rounds",
        str(args.rounds),
        "--steps",
        str(args.steps),
        "--queries",
        str(args.queries),
        "--draws",
        str(args.draws),
        "--logit-std",
        str(args.logit_std),
        *(["--only", *args.only] if args.only else []),
    ]
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data
        if not args.skip_steps:
            if data_dir is None:
                data_dir = beauty_data(tmp, synthetic=True)
            print(f"Part 1: training steps on {data_dir}'s packed batches")
            from genni.components import schema

            own = schema.DatasetInfo.load(data_dir).num_items
            for size in args.sizes:
                size = max(size, own)  # The catalog grows; it never shrinks.
                point = child(["--data", data_dir, "--step-point", str(size), *shared])
                steps.append(point)
                base = point["ms_per_step"][UNIFORM]
                print(
                    f"  {size:>9,} items: "
                    + ", ".join(
                        f"{n} {ms:.0f} ms ({ms / base:.2f}x)"
                        for n, ms in point["ms_per_step"].items()
                    ),
                    flush=True,
                )
    laws, run_laws = [], []
    if not args.skip_law:
        print("Part 2: TV distance of the capped and two-level laws to the exact one")
        for size in args.sizes:
            point = child(["--law-point", str(size), *shared])
            laws.append(point)
            print(f"  Gaussian, {size:,} items: {point}", flush=True)
        run_laws = law_of_run(args.run, args) if args.run else []
    for point in run_laws:
        print(f"  {args.run}: {point}", flush=True)

    results = {
        "data": data_dir if not args.skip_steps else None,
        "run": args.run,
        "steps": steps,
        "law_gaussian": laws,
        "law_run": run_laws,
        "settings": vars(args),
        "machine": machine(),
    }
    write_results(args.name, results, markdown(results, args))
    return 0


def markdown(results: dict, args) -> str:
    lines = ["# GenNi as the catalog grows\n"]
    if results["steps"]:
        lines.append(
            f"Part 1: ms per training step (packed batches of "
            f"`{relative(results['data'] or '-')}`, "
            f"batch 256, d 64, the catalog grown to each size), median of "
            f"{args.rounds} side-by-side rounds of {args.steps} steps, "
            f"{machine()['cpus']} CPUs; ratio to uniform BCE in brackets.\n"
        )
        names = list(results["steps"][-1]["ms_per_step"])
        for point in results["steps"]:
            names += [n for n in point["ms_per_step"] if n not in names]
        lines += [
            "| items | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for point in results["steps"]:
            ms = point["ms_per_step"]
            cells = [
                f"{ms[n]:.0f} ({ms[n] / ms[UNIFORM]:.2f}x)" if n in ms else "not run"
                for n in names
            ]
            lines.append(f"| {point['items']:,} | " + " | ".join(cells) + " |")
        lines.append(
            f"\n{RECOMMENDED}: the preset as `genni train` runs it, its budget of "
            f"{BUDGET:,} scores a step setting M from the batches' mean positions ("
            + "; ".join(
                f"{p['items']:,} items: {p['positions_per_step']:,.0f} positions, "
                f"M {p['recommended_candidates']:,}"
                for p in results["steps"]
                if "recommended_candidates" in p
            )
            + ")."
        )
    if not args.skip_law:
        lines += part2(results, args)
    lines.append(f"\nCommand: `{command(args)}`\n")
    return "\n".join(lines)


def part2(results: dict, args) -> list[str]:
    """Part 2's table."""
    lines = [
        "\nPart 2: total-variation distance of a draw capped at M candidates, "
        "and of the two-level draw (R candidates from C k-means clusters, "
        "resampled by their scores), to the exact softmax, mean over "
        f"{args.queries} queries ({args.draws} draws of the other candidates' "
        "mass each); top-1: the median probability of a query's most likely "
        "item under the exact law; mass in top t: the median share of the exact "
        "law in the t clusters of highest centroid score.\n",
        "| scores | items | top-1 | "
        + " | ".join(f"TV, M {cap:,}" for cap in CAPS)
        + " | clusters C | "
        + " | ".join(f"mass in top {t} of C" for t in TOP_CLUSTERS)
        + " | "
        + " | ".join(f"TV, C clusters, R {r}" for r in CLUSTER_SAMPLES)
        + " |",
        "|---|---|---|"
        + "---|" * (len(CAPS) + 1 + len(TOP_CLUSTERS) + len(CLUSTER_SAMPLES)),
    ]

    def tv_cells(p: dict) -> str:
        keys = [f"tv_M{cap}" for cap in CAPS]
        cells = [f"{p[key]:.3f}" if key in p else "-" for key in keys]
        cells.append(f"{p['clusters']:,}" if "clusters" in p else "-")
        keys = [f"mass_top{t}_clusters" for t in TOP_CLUSTERS]
        cells += [f"{p[key]:.3f}" if key in p else "-" for key in keys]
        keys = [f"tv_C_R{r}" for r in CLUSTER_SAMPLES]
        cells += [f"{p[key]:.3f}" if key in p else "-" for key in keys]
        return " | ".join(cells)

    for p in results["law_gaussian"]:
        lines.append(
            f"| Gaussian, logit std {args.logit_std} | {p['items']:,} | "
            f"{p['top1_prob']:.3f} | {tv_cells(p)} |"
        )
    for p in results["law_run"]:
        scores = (
            f"trained run, the share M / N of {p['as_if_items']:,} items"
            if "as_if_items" in p
            else "trained run, its own catalog"
        )
        lines.append(
            f"| {scores} | {p['items']:,} | {p['top1_prob']:.3f} | {tv_cells(p)} |"
        )
    if any("mass_succ" in p for p in results["law_run"]):
        lines += [
            "\nThe same trained run's queries with successor candidates "
            f"(`--successors {SUCCESSORS}`: each query's input item and its "
            f"{SUCCESSORS} most frequent successors scored beside the M uniform "
            "ones): the exact law's median mass on them, and the TV of each "
            "capped draw without and with them.\n",
            "| scores | mass on input item + successors | "
            + " | ".join(f"TV, M {c:,} | with successors" for c in SUCCESSOR_CAPS)
            + " |",
            "|---|---|" + "---|---|" * len(SUCCESSOR_CAPS),
        ]
        for p in results["law_run"]:
            if "mass_succ" not in p:
                continue
            share = p.get("as_if_items")
            scores = f"share M / N of {share:,} items" if share else "its own catalog"
            cells = " | ".join(
                f"{p[f'tv_M{c}']:.3f} | {p[f'tv_M{c}_succ']:.3f}"
                for c in SUCCESSOR_CAPS
            )
            lines.append(f"| {scores} | {p['mass_succ']:.3f} | {cells} |")
    return lines


def command(args) -> str:
    """The command line that made the results."""
    words = ["python", "benchmarks/sampler_scale.py"]
    if args.data:
        words += ["--data", relative(args.data)]
    if args.run:
        words += ["--run", relative(args.run)]
    if args.skip_law:
        words.append("--skip-law")
    if args.skip_steps:
        words.append("--skip-steps")
    else:
        words += ["--rounds", str(args.rounds), "--steps", str(args.steps)]
        if args.only:
            words += ["--only", *args.only]
    for name, default in DEFAULTS.items():
        if getattr(args, name) != default:
            words += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    if list(args.sizes) != list(SIZES):
        words += ["--sizes", *map(str, args.sizes)]
    if args.name != "sampler_scale":
        words += ["--name", args.name]
    return shell_line(words)


if __name__ == "__main__":
    sys.exit(main())
