"""`genni replay`: how a served model would have done, period after period.

A timestamped log is replayed: at each of `--steps` cut times, `--every` days
apart, the log up to that time is the input of `genni pipeline` (its file,
`--config`), and the version it serves afterwards is scored on the **next**
period's events, as its users would have met it: every event of the period
whose user has an earlier event is a case, its history all of the user's
earlier events (raw ids, as a client sends them), its target the event.

Side by side, from the same steps:

- `warm`: the pipeline with `train: {warm_start: served}` (the nightly loop);
- `scratch`: the same pipeline, every run from scratch;
- `never`: the first step's served version, never retrained;
- `popular`: the items most often met before the cut, most first.

Output in `--output`: `replay.md` (a table per step: NDCG@10 and HR@10 of the
four, training seconds, catalog size and new-item share, published or
refused), `replay.json`, `replay.png` (NDCG@10 per step), and the pipelines'
work directories.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

DAY = 86400.0
VARIANTS = ("warm", "scratch", "never", "popular")


def read_log(path: str) -> tuple[list[str], list[list[float]], dict]:
    """The log's lines, each line's event times, and each user's events
    [(time, item)] oldest first."""
    from genni.pipeline.preprocess import formats, inmemory, outputs

    fmt = inmemory.log_format(path, formats.AUTO, None)
    parse = formats.parser_for(fmt, inmemory.log_header(path, fmt))
    lines, times = [], []
    events: dict[str, list] = collections.defaultdict(list)
    for _, line in outputs.iter_lines(path):
        try:
            parsed = list(parse(line)) if line.strip() else []
        except formats.MalformedRecord:
            parsed = []
        lines.append(line)
        times.append([e.timestamp for e in parsed])
        for e in parsed:
            events[e.user].append((e.timestamp, e.item))
    for user in events:
        events[user] = sorted(set(events[user]))
    return lines, times, dict(events)


def cut_times(last: float, every_days: float, steps: int) -> list[float]:
    """`steps` cut times `every_days` apart, the last one period before the
    log's end, so that every step has a next period to be scored on."""
    return [last - (steps + 1 - s) * every_days * DAY for s in range(1, steps + 1)]


def write_cut(
    lines: list[str], times: list[list[float]], cut: float, path: str
) -> None:
    """The lines whose events all came at or before `cut` (header lines kept)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for line, ts in zip(lines, times, strict=True):
            if all(t <= cut for t in ts):
                f.write(line + "\n")


def next_period_cases(events: dict, start: float, end: float):
    """(histories, targets) of the events in (start, end] whose user has an
    earlier event: raw ids, histories all the user's earlier items."""
    histories, targets = [], []
    for timed in events.values():
        for n, (t, item) in enumerate(timed):
            if start < t <= end and n > 0:
                histories.append([i for _, i in timed[:n]])
                targets.append(item)
    return histories, targets


def _padded(histories: list[list[str]]):
    import numpy as np

    width = max(len(h) for h in histories)
    out = np.full((len(histories), width), "", dtype=object)
    for row, history in enumerate(histories):
        out[row, : len(history)] = history
    return out


def score_version(
    path: str, histories, targets, batch: int = 256, served: set | None = None
) -> dict:
    """NDCG@10 and HR@10 (%) of the SavedModel at `path` on the cases;
    `served`: a set that collects every item of the top-10s it answers."""
    from genni.components.metrics import RankingAccumulator
    from genni.pipeline.serving import guard

    top_k = guard.top_k_signature(path)
    accumulator = RankingAccumulator()
    for start in range(0, len(targets), batch):
        rows = slice(start, start + batch)
        ranks, ids = guard.served_rankings(
            top_k, _padded(histories[rows]), targets[rows]
        )
        accumulator.update(ranks)
        if served is not None:  # The top-10s, from the same answer.
            served.update(i.decode() for i in ids[:, :10].ravel() if i)
    return _two(accumulator.result())


def score_popular(
    events: dict, cut: float, histories, targets, candidates: str
) -> dict:
    """The most-popular-items baseline: items by their events up to `cut`,
    each ranking leaving out what the run's rule leaves out (`candidates`,
    `metrics.left_out`: under "new" a user's own items), as the model's does."""
    import numpy as np
    import tensorflow as tf

    from genni.components import metrics

    counts = collections.Counter(
        item for timed in events.values() for t, item in timed if t <= cut
    )
    order = [item for item, _ in counts.most_common()]
    index = {item: i for i, item in enumerate(order, start=1)}  # 0: unknown.
    rows = [[index.get(i, 0) for i in history] for history in histories]
    history = tf.ragged.constant(rows, dtype=tf.int64, ragged_rank=1)
    excluded = metrics.left_out(history, candidates).to_list()
    accumulator = metrics.RankingAccumulator()
    for left_out, target in zip(excluded, targets, strict=True):
        skip = set(left_out)
        ranked = [i for i in order[: 20 + len(skip)] if index[i] not in skip]
        rank = ranked.index(target) if target in ranked else len(order)
        accumulator.update(np.array([rank]))
    return _two(accumulator.result())


def _two(metrics: dict) -> dict:
    return {k: round(metrics[k], 4) for k in ("NDCG@10", "HR@10")}


def _served(workdir: str) -> str | None:
    from genni.pipeline.serving import guard

    base = os.path.join(workdir, "models")
    version = guard.served_version(base)
    return None if version is None else os.path.join(base, str(version))


def replay(
    log_path: str,
    every_days: float,
    steps: int,
    config: dict,
    output: str,
    log=print,
    serve: bool = False,
    loops: tuple[str, ...] = ("warm", "scratch"),
) -> list[dict]:
    """Replay `log_path` (see the module); returns one row per step. With
    `serve`, `genni serve` runs on the loop's models directory from the first
    published version on, asked all along (`serving.probe`)."""
    from genni.components import schema
    from genni.pipeline.cli import workflow
    from genni.pipeline.preprocess import outputs
    from genni.pipeline.serving.probe import ServeProbe
    from genni.pipeline.training import rundir

    if steps < 1 or every_days <= 0:
        raise ValueError("--steps must be at least 1 and --every positive.")
    lines, times, events = read_log(log_path)
    last = max(t for ts in times for t in ts)
    cuts = cut_times(last, every_days, steps)
    train = dict(config.get("train") or {})
    train.pop("warm_start", None)
    every_loop = {
        "warm": {**config, "train": {**train, "warm_start": workflow.SERVED}},
        "scratch": {**config, "train": train},
    }
    loops = {name: every_loop[name] for name in loops}
    candidates = workflow.train_config(every_loop["scratch"], "", {}).candidates
    rows, first = [], None
    suffix = os.path.splitext(log_path)[1]
    # Items the loop's vocabulary first holds at a step after the first, and
    # whether a served top-10 holds them from that step on.
    known: set = set()
    new_items: set = set()
    reached: set = set()
    probe = None
    trained: set = set()  # Runs met before: a step that reuses one trained 0 s.
    try:
        for step, cut in enumerate(cuts, start=1):
            step_log = os.path.join(output, "logs", f"step{step:02d}{suffix}")
            write_cut(lines, times, cut, step_log)
            histories, targets = next_period_cases(events, cut, cut + every_days * DAY)
            row: dict = {"step": step, "cut": cut, "cases": len(targets)}
            for name, loop in loops.items():
                workdir = os.path.join(output, name)
                loop = {**loop, "input": step_log, "workdir": workdir}
                start = time.perf_counter()
                result = workflow.run(loop, log=lambda m, n=name: log(f"[{n}] {m}"))
                row[f"{name}_seconds"] = round(time.perf_counter() - start, 1)
                row[f"{name}_train_seconds"] = sum(  # The refit's too.
                    train_seconds(run, trained)
                    for run in (result["run"], result.get("refit"))
                    if run
                )
                trained.update({result["run"], result.get("refit")})
                row[f"{name}_export"] = result["export"]["decision"]
                row[f"{name}_why"] = result["export"]["why"]
                row[f"{name}_served"] = served_what(workdir)
                if name != "warm":
                    continue
                _, vocabulary = outputs.read_vocabulary(result["data"])
                arrived = set(vocabulary) - known if known else set()
                new_items |= arrived
                known |= set(vocabulary)
                row["new_items"] = len(arrived)
                stats = rundir.read_json(
                    os.path.join(result["data"], schema.STATS_FILE)
                )
                row["items"] = stats["items"]
                row["kcore"] = kcore_shares(stats)
                split = stats.get("time_split") or {}
                row["new_item_share"] = split.get("test_new_item_share")
                if serve and probe is None and _served(workdir):  # From v1 on.
                    probe = ServeProbe(
                        os.path.join(workdir, "models"),
                        os.path.join(output, "serve.log"),
                    ).start()
                    log(f"[serve] genni serve on {probe.url}, gRPC {probe.target}")
                if probe is not None:  # Users of the next period ask it.
                    probe.ask(histories)
            if first is None:  # The first step's version: never retrained.
                first = _served(os.path.join(output, next(iter(loops))))
            top10: set = set()
            for name in VARIANTS[:2]:
                if name not in loops:
                    row[name] = {}
                    continue
                served = _served(os.path.join(output, name))
                collect = top10 if name == "warm" else None
                row[name] = (
                    score_version(served, histories, targets, served=collect)
                    if targets and served
                    else {}
                )
            reached |= {item for item in top10 if item in new_items}
            row["new_items_reached"] = len(reached)
            row["never"] = (
                score_version(first, histories, targets) if targets and first else {}
            )
            row["popular"] = score_popular(events, cut, histories, targets, candidates)
            if "warm" in loops or "scratch" in loops:
                row["unservable"] = unservable(
                    _served(os.path.join(output, next(iter(loops)))),
                    events,
                    cut,
                    targets,
                )
            for name in loops:  # A served model below "most popular".
                row[f"{name}_below_popular"] = below_popular(row, name)
            if probe is not None:
                row["serve"] = probe.counts()  # So far.
            rows.append(row)
            log(f"step {step}: " + json.dumps({v: row[v] for v in VARIANTS}))
            write_report(rows, output, log_path, every_days, steps)  # After each.
    finally:
        if probe is not None:
            probe.stop()
    if probe is not None:  # The last step's swap is served a while too.
        rows[-1]["serve"] = probe.counts()
        write_report(rows, output, log_path, every_days, steps)
    return rows


def unservable(path: str | None, events: dict, cut: float, targets) -> dict:
    """The shares of `targets` the SavedModel at `path` cannot rank (not in
    its vocabulary): `new`, items never met up to `cut`, and `met`, items
    met before it that the served version does not know (removed by the
    k-core, or newer than the served version)."""
    import tensorflow as tf

    if path is None or not targets:
        return {}
    known = {i.decode() for i in tf.saved_model.load(path).item_strings.numpy()}
    met = {item for timed in events.values() for t, item in timed if t <= cut}
    out = [t for t in targets if t not in known]
    return {
        "new": round(sum(t not in met for t in out) / len(targets), 4),
        "met": round(sum(t in met for t in out) / len(targets), 4),
    }


def kcore_shares(stats: dict) -> dict:
    """What the k-core of a step's dataset removed: its share of the items
    met before the validation cutoff, and of each window's targets."""
    kcore, window = stats["kcore"], stats.get("time_split") or {}
    shares = {}
    if kcore.get("items_before"):
        shares["catalog"] = round(kcore["items_removed"] / kcore["items_before"], 4)
    for split in ("valid", "test"):
        cases = window.get(f"{split}_cases")
        if cases and f"{split}_kcore_removed_targets" in window:
            shares[split] = round(window[f"{split}_kcore_removed_targets"] / cases, 4)
    return shares


def served_what(workdir: str) -> str:
    """What the loop in `workdir` serves: 'v3', 'v1 (popular)' for the
    popularity ranking (`export.export_popular`), or 'nothing'."""
    from genni.pipeline.serving import export

    path = _served(workdir)
    if path is None:
        return "nothing"
    version = os.path.basename(path)
    return f"v{version} (popular)" if export.is_popular(path) else f"v{version}"


def below_popular(row: dict, name: str) -> bool:
    """Whether the loop `name` served a model below the popularity ranking
    (its popularity fallback is that ranking, from the loop's own data)."""
    served = row[name].get("NDCG@10")
    if served is None or "(popular)" in row.get(f"{name}_served", ""):
        return False
    return served < row["popular"]["NDCG@10"]


def train_seconds(run_dir: str, trained: set) -> float:
    """Seconds the run trained and validated (its epochs' records), 0 for a
    run an earlier step trained."""
    from genni.pipeline.training import rundir

    if run_dir in trained:
        return 0.0
    metrics = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE))
    return round(
        sum(
            r["train_seconds"] + r.get("eval_seconds", 0.0) for r in metrics["history"]
        ),
        1,
    )


def write_report(rows, output, log_path, every_days, steps) -> None:
    """replay.md, replay.json and, with matplotlib, replay.png."""
    with open(os.path.join(output, "replay.json"), "w") as f:
        json.dump(rows, f, indent=2)
    shown = [v for v in VARIANTS if any(r[v] for r in rows)]
    loops = [v for v in ("warm", "scratch") if v in shown]
    head = (
        "| step | cases | items | k-core removed: catalog / test targets | "
        "targets unknown to the served model: never met / met before the cut | "
        + " | ".join(f"{v} NDCG@10" for v in shown)
        + "".join(f" | {v} serves | {v} train s | {v} pipeline s" for v in loops)
        + " | warm export |"
    )
    lines = [
        f"# Replay of {os.path.basename(log_path)}: {steps} steps, every "
        f"{every_days:g} days",
        "",
        "Each step's served version scored on the next period's events (%); "
        "**bold**: a served model below the popularity ranking.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]

    def ndcg(r, v):
        value = f"{r[v].get('NDCG@10', float('nan')):.2f}"
        return f"**{value}**" if r.get(f"{v}_below_popular") else value

    for r in rows:
        gone, kcore = r.get("unservable") or {}, r.get("kcore") or {}
        lines.append(
            f"| {r['step']} | {r['cases']:,} | {r.get('items', 0):,} | "
            + (
                f"{100 * kcore['catalog']:.1f}% / {100 * kcore.get('test', 0):.1f}%"
                if "catalog" in kcore
                else ""
            )
            + " | "
            + (f"{100 * gone['new']:.1f}% / {100 * gone['met']:.1f}%" if gone else "")
            + " | "
            + " | ".join(ndcg(r, v) for v in shown)
            + "".join(
                f" | {r.get(f'{v}_served', '')}"
                f" | {r.get(f'{v}_train_seconds', float('nan')):.0f}"
                f" | {r.get(f'{v}_seconds', float('nan')):.0f}"
                for v in loops
            )
            + f" | {r.get('warm_export', '')} |"
        )
    means = {v: sum(r[v].get("NDCG@10", 0.0) for r in rows) / len(rows) for v in shown}
    lines += [
        "",
        "Steps whose served model was below the popularity ranking: "
        + ", ".join(
            f"{v} {sum(bool(r.get(f'{v}_below_popular')) for r in rows)} of {len(rows)}"
            for v in loops
        )
        + ".",
    ]
    refusals = [
        f"- step {r['step']}: {r['warm_why']}"
        for r in rows
        if r.get("warm_export") not in (None, "published")
    ]
    if refusals:
        lines += ["", "Candidates of the warm loop refused:", "", *refusals]
    arrived = sum(r.get("new_items", 0) for r in rows)
    later = rows[1:]  # Step 1 trains both loops from scratch.
    spent = {
        v: sum(r.get(f"{v}_train_seconds", 0.0) for r in later)
        for v in ("warm", "scratch")
    }
    lines += [
        "",
        "Mean NDCG@10: "
        + ", ".join(f"{v} {m:.2f}" for v, m in means.items())
        + (
            f" (warm / scratch: {means['warm'] / means['scratch']:.3f})"
            if means.get("scratch") and means.get("warm")
            else ""
        )
        + (
            f" (warm / popular: {means['warm'] / means['popular']:.3f})"
            if means.get("warm") and means.get("popular")
            else ""
        ),
        "",
        f"Training seconds after step 1: warm {spent['warm']:.0f}, scratch "
        f"{spent['scratch']:.0f}"
        + (
            f" (warm / scratch: {spent['warm'] / spent['scratch']:.3f})."
            if spent["scratch"]
            else "."
        ),
        "",
        f"Items that entered the loop's vocabulary after the first step: {arrived}; "
        "in a served top-10 of the loop from the step that first knew them: "
        f"{rows[-1].get('new_items_reached', 0)}.",
    ]
    serving = rows[-1].get("serve")
    if serving:
        by_api = serving["by_api"]
        lines += [
            "",
            f"`--serve`: {serving['requests']:,} requests to `genni serve` on the "
            f"loop's models (REST {by_api['rest']['requests']:,}, gRPC "
            f"{by_api['grpc']['requests']:,}), {serving['failures']:,} failed; "
            "versions that answered, in order: "
            + ", ".join(str(v) for v in serving["versions"])
            + ".",
        ]
        lines += [f"- {error}" for error in serving["errors"]]
    with open(os.path.join(output, "replay.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps = [r["step"] for r in rows]
    figure, (ndcg, seconds, catalog) = plt.subplots(
        3, 1, figsize=(6.5, 8), sharex=True, height_ratios=(2, 1, 1)
    )
    for v in shown:
        ndcg.plot(steps, [r[v].get("NDCG@10") for r in rows], marker="o", label=v)
    refused = [r for r in rows if r.get("warm_export", "published") != "published"]
    if refused:  # The loop kept the version it served.
        ndcg.scatter(
            [r["step"] for r in refused],
            [r["warm"].get("NDCG@10") for r in refused],
            s=120,
            facecolors="none",
            edgecolors="black",
            label="warm: candidate refused",
        )
    ndcg.set_ylabel("NDCG@10, next period (%)")
    ndcg.legend(fontsize="small")
    for v in loops:
        seconds.plot(
            steps, [r.get(f"{v}_train_seconds") for r in rows], marker="o", label=v
        )
    seconds.set_ylabel("training seconds")
    seconds.legend(fontsize="small")
    catalog.plot(steps, [r.get("items", 0) for r in rows], marker="o", color="gray")
    catalog.set_ylabel("items")
    share = catalog.twinx()
    share.bar(
        steps,
        [100 * (r.get("new_item_share") or 0.0) for r in rows],
        alpha=0.3,
        color="tab:red",
    )
    share.set_ylabel("new-item test targets (%)", color="tab:red")
    catalog.set_xlabel("step")
    catalog.set_xticks(steps)
    figure.tight_layout()
    figure.savefig(os.path.join(output, "replay.png"), dpi=120)
    plt.close(figure)


def _replay(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.cli import workflow

    config = workflow.load_config(args.config, needs=())
    every = args.every.removesuffix("d")
    try:
        every_days = float(every)
    except ValueError:
        raise ValueError(f"--every takes days, e.g. 7d. Got {args.every!r}.") from None
    replay(
        args.input,
        every_days,
        args.steps,
        config,
        args.output,
        serve=args.serve,
        loops=("warm", "scratch") if args.loops == "both" else (args.loops,),
    )
    print(f"Report: {os.path.join(args.output, 'replay.md')}")
    return 0


def add_replay(commands) -> None:
    p = commands.add_parser(
        "replay",
        help="Replay a timestamped log: the nightly pipeline, step by step, each "
        "served version scored on the next period.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", required=True, help="A timestamped log (one file).")
    p.add_argument("--every", default="7d", help="Days between steps (default 7d).")
    p.add_argument("--steps", type=int, required=True, help="How many steps.")
    p.add_argument(
        "--config",
        required=True,
        help="The pipeline file (`genni pipeline`), without input and workdir: "
        "the replay sets them (--input cut at each step, --output).",
    )
    p.add_argument("--output", required=True, help="Directory to write.")
    p.add_argument(
        "--loops",
        choices=("both", "warm", "scratch"),
        default="both",
        help="Which loops run: the warm-started one, the one from scratch, or "
        "both side by side (default both; one loop takes about half the time).",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="Run `genni serve` on the loop's models directory from the first "
        "published version on, with a client asking it all along (REST and gRPC, "
        "the next period's histories): the report counts its requests and "
        "failures across every swap.",
    )
    p.set_defaults(handler=_replay)
