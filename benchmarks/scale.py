"""The whole pipeline at catalog scale, one command, one table.

Makes a synthetic log with a planted sequential signal (`genni synth`,
streamed), then runs the real commands on it, each in its own process:
preprocess (Beam, multi_processing), train with uniform negatives and with
GenNi (the recommended preset), evaluate, export, serve (REST and gRPC latency
at each --concurrency), and batch-recommend (Beam). Writes one table: each
stage's wall time and peak memory (max RSS of its largest process), each
sampler's step time, and full-ranking test HR@10 / NDCG@10 on the planted
signal.

    python benchmarks/scale.py --items 1000000 --users 100000 [--epochs 1]
        [--workdir DIR] [--name scale]

A large catalog needs a flat popularity (--zipf-exponent) and enough events
per item to pass the k-core (--min-count): the defaults (100,000 users of 50
events on average, skew 0.3, a 3-core) kept 717,168 of 10^6 items and took 44
minutes of stage time on a 2-core, 24 GiB machine; `--items 1080000
--min-count 1 --epochs 2` kept 1,017,102 (every item touched) and took 89
minutes there beside two other trainings (docs/scale.md). Full ranking costs
users x items, and runs in every validation and test of training, then in
evaluate and batch-recommend, so users are few and their histories long. Grow
--users, --epochs and --beam-workers on bigger machines. --workdir DIR
--resume finishes a killed run (the serving stages are measured again).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from _common import free_port, machine, write_results

from genni.components import schema
from research.commands import shell_line

GIB = 1 << 30
GENNI = [sys.executable, "-m", "genni.pipeline.cli.main"]
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1"}


# Runs a stage's command and writes the peak RSS of its largest process. A
# child forked from a large process (this one, once serving imported TensorFlow)
# counts the parent's pages in its own peak, so the stage is started from this
# small launcher, whose children's peak is then the command's own.
LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(str(peak))\n"
    "sys.exit(code)\n"
)


def run_stage(
    name: str, command: list[str], log_dir: str, resume: bool = False
) -> dict:
    """Run one stage's command; its wall time and peak RSS (that of its
    largest process, the descendants it waited for included). Raises with the
    log's tail if the command fails. The record is kept beside the log; with
    `resume`, a stage that has one is not run again (its record is returned)."""
    record_path = os.path.join(log_dir, f"{name}.json")
    if resume and finished(log_dir, name):
        with open(record_path) as f:
            record = json.load(f)
        print(f"  {name}: done before, {record['seconds']:.1f} s (--resume)")
        return record
    log_path = os.path.join(log_dir, f"{name}.log")
    peak_path = os.path.join(log_dir, f"{name}.peak_kib")
    print(f"  {name}: {shown(command)}", flush=True)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        code = subprocess.call(
            [sys.executable, "-c", LAUNCHER, peak_path, *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ | QUIET_ENV,
        )
    seconds = time.perf_counter() - start
    if code:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"Stage {name} failed ({code}); its log ends:\n{tail}")
    with open(peak_path) as f:
        peak = int(f.read()) * 1024 / GIB
    print(f"    {seconds:.1f} s, peak {peak:.2f} GiB", flush=True)
    record = {"stage": name, "seconds": seconds, "peak_rss_gib": peak}
    with open(record_path, "w") as f:
        json.dump(record, f)
    return record


def finished(log_dir: str, name: str) -> bool:
    """Whether stage `name` has its record in `log_dir` (it ran to the end)."""
    return os.path.exists(os.path.join(log_dir, f"{name}.json"))


def shown(command: list[str]) -> str:
    """A stage's command as a person would type it (`genni ...`)."""
    if command[: len(GENNI)] == GENNI:
        command = ["genni", *command[len(GENNI) :]]
    return shell_line(command)


def top10(port: int, histories: list[list[str]]) -> list[list[str]]:
    """The served top 10 of each history (REST, k = 10)."""
    import http.client

    answers = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for start in range(0, len(histories), 100):
        body = {"instances": [{"history": h, "k": 10} for h in histories[start:][:100]]}
        conn.request(
            "POST",
            "/v1/models/genni:predict",
            body=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"{response.status} {response.read()[:300]!r}")
        answers += [p["item_ids"] for p in json.loads(response.read())["predictions"]]
    conn.close()
    return answers


def serve_stage(model_base: str, histories: list, args, ann: bool = False) -> dict:
    """`genni serve` on the export (`--ann`: top-K from its ANN index): latency
    p50/p99 of REST and gRPC at each concurrency, each history's top 10, then
    its peak RSS (VmHWM) before it stops."""
    from genni.pipeline import quiet

    quiet.configure(verbose=False)
    quiet.start_quietly()  # The gRPC client imports TensorFlow.
    from serving import grpc_caller, load, rest_caller

    rest, grpc = free_port(), free_port()
    command = [
        *GENNI,
        "serve",
        "--model-base-path",
        model_base,
        "--rest-port",
        str(rest),
        "--grpc-port",
        str(grpc),
        *(["--ann"] if ann else []),
    ]
    name = "serve_ann" if ann else "serve"
    print(f"  {name}: {shown(command)}", flush=True)
    start = time.perf_counter()
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=os.environ | QUIET_ENV
    )
    try:
        line = server.stdout.readline()
        if not line.startswith("Serving"):
            raise RuntimeError(f"genni serve did not start: {line!r}")
        ready = time.perf_counter() - start
        latency = {}
        for api, caller in (("rest", rest_caller(rest)), ("grpc", grpc_caller(grpc))):
            load(caller, histories, max(4, args.requests // 10), 1)  # Warm up.
            for c in args.concurrency:
                latency[f"{api}_c{c}"] = load(caller, histories, args.requests, c)
                r = latency[f"{api}_c{c}"]
                print(
                    f"    {api} concurrency {c}: p50 {r['p50_ms']:.1f} ms, "
                    f"p99 {r['p99_ms']:.1f} ms, {r['failures']} failed",
                    flush=True,
                )
        answers = top10(rest, histories)
        with open(f"/proc/{server.pid}/status") as f:
            peak_kib = next(int(x.split()[1]) for x in f if x.startswith("VmHWM"))
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "stage": name,
        "seconds": ready,
        "peak_rss_gib": peak_kib * 1024 / GIB,
        "latency": latency,
        "top10": answers,
    }


def histories_of(data: str, count: int) -> list[list[str]]:
    """Raw item-id histories of the first `count` users of `sequences.tsv`."""
    histories = []
    with open(os.path.join(data, schema.SEQUENCES_FILE)) as f:
        for line in f:
            items = line.rstrip("\n").split("\t")[1].split()
            histories.append(items[:-2][-50:] or items[:1])
            if len(histories) == count:
                break
    return histories


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--mean-length", type=float, default=50.0)
    parser.add_argument("--zipf-exponent", type=float, default=0.3)
    parser.add_argument(
        "--min-count", type=int, default=3, help="k of the k-core (preprocess)."
    )
    parser.add_argument("--epochs", type=int, default=1, help="Training epochs each.")
    parser.add_argument(
        "--requests",
        type=int,
        default=400,
        help="Serving requests per API and concurrency.",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--beam-workers",
        type=int,
        default=os.cpu_count() or 2,
        help="Beam DirectRunner workers (multi_processing).",
    )
    parser.add_argument(
        "--workdir",
        default=None,
        help="Where the stages write (default: a temporary dir, removed).",
    )
    parser.add_argument(
        "--genni-flags",
        default="",
        help="More `genni train` flags for the GenNi run, e.g. '--max-candidates 0' "
        "(the exact draw) or '--preset paper' (one flag alone: --genni-flags=--pack).",
    )
    parser.add_argument(
        "--ann-kind",
        default="ivf",
        choices=("ivf", "hnsw"),
        help="The ANN index served beside brute force (genni ann-index --kind).",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="With --workdir: keep the stages a killed run finished (their "
        "records in WORKDIR/logs) and run the rest.",
    )
    parser.add_argument("--name", default="scale", help="Results file name.")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.workdir is None:
        parser.error("--resume needs the --workdir of the run to resume.")

    own = args.workdir is None
    work = tempfile.mkdtemp(prefix="genni_scale_") if own else args.workdir
    os.makedirs(work, exist_ok=True)
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    log_path, data = os.path.join(work, "log.json.gz"), os.path.join(work, "data")
    runs, model = os.path.join(work, "runs"), os.path.join(work, "model")
    beam = [
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        str(args.beam_workers),
    ]
    stages = []
    try:
        print(f"Scale run in {work}: {args.items:,} items, {args.users:,} users")
        stages.append(
            run_stage(
                "synth",
                [
                    *GENNI,
                    "synth",
                    "--output",
                    log_path,
                    "--num-users",
                    str(args.users),
                    "--num-items",
                    str(args.items),
                    "--mean-length",
                    str(args.mean_length),
                    "--zipf-exponent",
                    str(args.zipf_exponent),
                ],
                logs,
                args.resume,
            )
        )
        stages.append(
            run_stage(
                "preprocess",
                [
                    *GENNI,
                    "preprocess",
                    "--input",
                    log_path,
                    "--output",
                    data,
                    "--overwrite",
                    "--min-count",
                    str(args.min_count),
                    *beam,
                ],
                logs,
                args.resume,
            )
        )
        with open(os.path.join(data, schema.STATS_FILE)) as f:
            stats = json.load(f)
        trained = {}
        for sampler, flags in (
            ("uniform", ["--preset", "paper", "--sampler", "uniform"]),
            ("genni", shlex.split(args.genni_flags)),
        ):
            out = os.path.join(runs, sampler)
            if not (args.resume and finished(logs, f"train_{sampler}")):
                shutil.rmtree(out, ignore_errors=True)
            stages.append(
                run_stage(
                    f"train_{sampler}",
                    [
                        *GENNI,
                        "train",
                        "--data",
                        data,
                        "--output",
                        out,
                        "--pack",
                        "--quiet",
                        "--epochs",
                        str(args.epochs),
                        *flags,
                    ],
                    logs,
                    args.resume,
                )
            )
            with open(os.path.join(out, "metrics.json")) as f:
                trained[sampler] = json.load(f)
        genni_run = os.path.join(runs, "genni")
        stages.append(
            run_stage(
                "evaluate",
                [*GENNI, "evaluate", "--run", genni_run, "--split", "test", "--json"],
                logs,
                args.resume,
            )
        )
        if not (args.resume and finished(logs, "export")):
            shutil.rmtree(model, ignore_errors=True)
        stages.append(
            run_stage(
                "export",
                [*GENNI, "export", "--run", genni_run, "--output", model],
                logs,
                args.resume,
            )
        )
        histories = histories_of(data, 200)
        stages.append(serve_stage(model, histories, args))
        version = os.path.join(model, "1")
        stages.append(
            run_stage(
                "ann_index",
                [*GENNI, "ann-index", "--model", version, "--kind", args.ann_kind],
                logs,
                args.resume,
            )
        )
        stages.append(serve_stage(model, histories, args, ann=True))
        from genni.pipeline.serving import ann  # TensorFlow is loaded by now.

        served = stages[-1]
        served["recall_at_10"] = ann.recall_at_k(served["top10"], stages[-3]["top10"])
        with open(os.path.join(version, ann.ANN_DIR, ann.META_FILE)) as f:
            served["index"] = json.load(f)
        print(f"    ANN recall@10 against brute force: {served['recall_at_10']:.3f}")
        for stage in stages[-3:]:
            stage.pop("top10", None)
        stages.append(
            run_stage(
                "batch_recommend",
                [
                    *GENNI,
                    "batch-recommend",
                    "--model",
                    model,
                    "--input",
                    os.path.join(data, schema.SEQUENCES_FILE),
                    "--output",
                    os.path.join(work, "recommendations"),
                    "--overwrite",
                    *beam,
                ],
                logs,
                args.resume,
            )
        )
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)

    steps = -(-stats["examples"]["train"] // 256)
    samplers = {
        name: {
            "ms_per_step": 1000 * m["seconds_per_epoch"] / steps,
            "seconds_per_epoch": m["seconds_per_epoch"],
            "test": m["test"],
            "epochs_run": m["epochs_run"],
        }
        for name, m in trained.items()
    }
    results = {
        "settings": vars(args),
        "dataset": {k: stats[k] for k in ("users", "items", "events")},
        "stages": stages,
        "samplers": samplers,
        "machine": machine(),
        "command": command_line(args),
    }
    write_results(args.name, results, markdown(results))
    return 0


def command_line(args) -> str:
    words = [
        "python",
        "benchmarks/scale.py",
        "--items",
        str(args.items),
        "--users",
        str(args.users),
        "--epochs",
        str(args.epochs),
    ]
    defaults = {
        "mean_length": 50.0,
        "zipf_exponent": 0.3,
        "min_count": 3,
        "requests": 400,
    }
    for name, default in defaults.items():
        if getattr(args, name) != default:
            words += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    if args.genni_flags:
        words += ["--genni-flags", args.genni_flags]
    if args.ann_kind != "ivf":
        words += ["--ann-kind", args.ann_kind]
    if args.concurrency != [1, 8]:
        words += ["--concurrency", *map(str, args.concurrency)]
    return shell_line(words)


def markdown(results: dict) -> str:
    d = results["dataset"]
    lines = [
        "# The pipeline at catalog scale\n",
        f"Synthetic log, planted signal: {d['users']:,} users, {d['items']:,} items, "
        f"{d['events']:,} events after the {results['settings']['min_count']}-core; "
        f"{results['machine']['cpus']} CPUs.\n",
        "| stage | wall s | peak RSS GiB |",
        "|---|---|---|",
    ]
    lines += [
        f"| {s['stage']} | {s['seconds']:.1f} | {s['peak_rss_gib']:.2f} |"
        for s in results["stages"]
    ]
    slowest = max(results["stages"], key=lambda s: s["seconds"])
    lines += [
        f"\nThe slowest stage, what limits scale on this machine: "
        f"**{slowest['stage']}** ({slowest['seconds']:.0f} s).\n",
        "Training (packed, batch 256): ms / step is the median epoch's time over "
        "its steps; test metrics rank every item (full ranking).\n",
        "| sampler | ms / step | s / epoch | epochs | test HR@10 | test NDCG@10 |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {s['ms_per_step']:.0f} | {s['seconds_per_epoch']:.1f} | "
        f"{s['epochs_run']} | {s['test']['HR@10']:.2f} | {s['test']['NDCG@10']:.2f} |"
        for name, s in results["samplers"].items()
    ]
    served = [s for s in results["stages"] if s["stage"] in ("serve", "serve_ann")]
    if served:
        lines += [
            "\n| serving | top-K | p50 ms | p99 ms | failed |",
            "|---|---|---|---|---|",
        ]
        for serve in served:
            how = "ANN index" if serve["stage"] == "serve_ann" else "brute force"
            lines += [
                f"| {k} | {how} | {v['p50_ms']:.1f} | {v['p99_ms']:.1f} | "
                f"{v['failures']} |"
                for k, v in serve["latency"].items()
            ]
        for serve in served:
            if "recall_at_10" in serve:
                index = serve["index"]
                params = ", ".join(
                    f"{k} {index[k]}" for k in ("nlist", "nprobe", "m") if k in index
                )
                lines.append(
                    f"\nANN index: {index['kind']} ({params}), built in "
                    f"{index['build_seconds']:.0f} s; recall@10 against brute force "
                    f"on the served histories: **{serve['recall_at_10']:.3f}**."
                )
    lines.append(f"\nCommand: `{results['command']}`\n")
    return "\n".join(lines)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
