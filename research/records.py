"""The archive of finished runs: one compact record per run, one line each.

A record (`benchmarks/results/runs.jsonl`) holds, per run, what the reports
and `benchmarks/reproduce.py` read from its metrics.json: its settings (seed
included; not the machine's paths `data` and `output`), its dataset's
fingerprint, its key, best epoch, valid and test metrics, epochs run and
seconds per epoch, plus the only per-epoch numbers a figure plots: validation
NDCG@10 (rounded to `DIGITS` decimals) and, for a self-adjusted curriculum,
alpha. The full per-epoch history stays in the run's directory.

`restore_runs` brings an archive's runs back as run directories (config.json
and metrics.json, no checkpoint) so a grid reports them instead of training
them again; `archive_runs` appends finished runs to it. Appending rewrites the
file through a temporary one and a rename, under a lock, and never holds two
lines of one run key.

An archive may also be a directory of metrics.json files (the old format),
read and written as before; `python -m research.records
OLD_DIR RECORD.jsonl` converts one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import sys
import tempfile

from genni.pipeline.training import keys, rundir
from genni.pipeline.training.config import TrainConfig
from research import run_names

RECORD_SUFFIX = ".jsonl"
# What an archived run adds to its metrics.json: its dataset's fingerprint, so
# the archive is matched to a dataset wherever that lives.
ARCHIVE_DATASET = "dataset"
# Settings that name places on one machine: not kept, set again on restoring.
MACHINE_SETTINGS = ("data", "output")
# Per-epoch fields of metrics.json a record leaves in the run directory.
PER_EPOCH_FIELDS = ("history", "sampler_over_time")
PER_EPOCH = "per_epoch"  # The record's few per-epoch series.
DIGITS = 4  # Decimals of the per-epoch validation NDCG@10 (in %).
ALPHA_DIGITS = 6


def resolve(archive: str) -> str:
    """The archive `archive` names: an existing directory (metrics.json files)
    or file as it is; otherwise a record file, `.jsonl` added when missing
    (so `benchmarks/results/runs`, the old directory, names its record)."""
    if os.path.exists(archive) or archive.endswith(RECORD_SUFFIX):
        return archive
    return archive + RECORD_SUFFIX


# ------------------------------------------------------------ one record


def _series(config: dict, history: list[dict]) -> dict | None:
    """The per-epoch numbers a figure plots, from a run's history."""
    if not history:
        return None
    series: dict = {
        "valid_ndcg10": [
            round(r["valid"]["NDCG@10"], DIGITS)
            if "NDCG@10" in r.get("valid", {})
            else None
            for r in history
        ]
    }
    epochs = [r["epoch"] for r in history]
    if epochs != list(range(1, len(history) + 1)):
        series["epoch"] = epochs
    if config.get("alpha_step") is not None and all("alpha" in r for r in history):
        series["alpha"] = [round(r["alpha"], ALPHA_DIGITS) for r in history]
    return series


def _history(series: dict) -> list[dict]:
    """A history of the per-epoch numbers a record keeps (`_series`)."""
    valid = series["valid_ndcg10"]
    epochs = series.get("epoch", range(1, len(valid) + 1))
    alpha = series.get("alpha")
    history = []
    for i, (epoch, ndcg) in enumerate(zip(epochs, valid, strict=True)):
        record: dict = {"epoch": epoch}
        if ndcg is not None:
            record["valid"] = {"NDCG@10": ndcg}
        if alpha is not None:
            record["alpha"] = alpha[i]
        history.append(record)
    return history


def to_record(metrics: dict, fingerprint: str, name: str) -> dict:
    """The record of a finished run's metrics.json, archived as `name`."""
    config = TrainConfig.from_dict(metrics["config"])
    record = {
        k: v
        for k, v in metrics.items()
        if k not in (*PER_EPOCH_FIELDS, "config", ARCHIVE_DATASET)
    }
    record.update(
        name=name,
        key=keys.run_key(config, fingerprint),
        config={
            k: v for k, v in metrics["config"].items() if k not in MACHINE_SETTINGS
        },
        **{ARCHIVE_DATASET: fingerprint},
    )
    series = _series(metrics["config"], metrics.get("history") or [])
    if series:
        record[PER_EPOCH] = series
    return record


def to_metrics(record: dict) -> dict:
    """A metrics.json of a record (with its dataset's fingerprint): the
    history holds only the per-epoch numbers the record keeps, and `data`
    and `output` are empty until the run is restored somewhere."""
    metrics = {k: v for k, v in record.items() if k not in ("name", "key", PER_EPOCH)}
    metrics["config"] = dict(record["config"], **dict.fromkeys(MACHINE_SETTINGS, ""))
    if PER_EPOCH in record:
        metrics["history"] = _history(record[PER_EPOCH])
    return metrics


# ------------------------------------------------------------ the file


def read(path: str) -> list[dict]:
    """The records of a record file, in its order ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a run record: {e}") from e
            if not isinstance(record, dict) or not {"key", "name"} <= set(record):
                raise ValueError(f"{path}:{number}: a run record needs a key and name")
            records.append(record)
    return records


def _line(record: dict) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def write(path: str, records: list[dict]) -> None:
    """Write `records` to `path`, one line each, by name then key: through a
    temporary file renamed over `path`, so a reader never sees half a file."""
    keys_seen = [r["key"] for r in records]
    if len(set(keys_seen)) != len(keys_seen):
        raise ValueError("Two records of one run key.")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    ordered = sorted(records, key=lambda r: (r["name"], r["key"]))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".runs-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(_line(r) + "\n" for r in ordered)
            f.flush()
            os.fsync(f.fileno())
        mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


@contextlib.contextmanager
def _locked(path: str):
    """Hold the lock of the folder of `path`: appends by several processes
    (report grids sharing an archive) do not lose each other's lines."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append(path: str, records: list[dict]) -> None:
    """Add `records` to the record file `path`, each replacing the line of
    its key if there is one."""
    with _locked(path):
        kept = {r["key"]: r for r in read(path)}
        kept.update((r["key"], r) for r in records)
        write(path, list(kept.values()))


# ------------------------------------------------------------ archives


def archived_runs(archive: str) -> dict[str, tuple[str, dict]]:
    """Run key -> (where, metrics) of the finished runs kept in `archive`:
    a record file (where: the run's name) or a directory of runs' metrics.json
    files (where: the file), any names. Entries that are not a run's metrics
    (or of another version) are skipped; where several share a key, an
    unpacked run wins, as in `keys.existing_runs`."""
    archive = resolve(archive)
    found: dict[str, list[tuple[tuple, tuple[str, dict]]]] = {}
    if os.path.isdir(archive):
        entries = []
        for name in sorted(os.listdir(archive)):
            path = os.path.join(archive, name)
            if not name.endswith(".json") or not os.path.isfile(path):
                continue
            try:
                entries.append((name, path, rundir.read_json(path)))
            except (ValueError, json.JSONDecodeError):
                continue
    else:
        entries = []
        for record in read(archive):
            with contextlib.suppress(KeyError, TypeError):
                entries.append((record["name"], record["name"], to_metrics(record)))
    for name, where, metrics in entries:
        try:
            config = TrainConfig.from_dict(metrics["config"])
        except (ValueError, TypeError, KeyError):
            continue  # Not a run of this version; leave it alone.
        fingerprint = metrics.get(ARCHIVE_DATASET) or keys.data_fingerprint(config.data)
        found.setdefault(keys.run_key(config, fingerprint), []).append(
            (keys.rank(config, name), (where, metrics))
        )
    return keys.preferred(found)


def restore_runs(archive: str, runs_dir: str, data: str) -> list[str]:
    """The finished runs on `data` kept in `archive`, made runs of `runs_dir`
    again where it has not finished them (a new machine, a deleted runs dir):
    each becomes `RUNS_DIR/<name>-<key>` with its config.json and metrics.json,
    so the grid and the reproduction reuse it instead of training it again.
    No checkpoint comes back: such a run is reported, not resumed or exported.
    Returns the run directories written."""
    fingerprint = keys.data_fingerprint(data)
    existing = keys.existing_runs(runs_dir)
    written = []
    for key, (_, metrics) in archived_runs(archive).items():
        config = TrainConfig.from_dict(metrics["config"])
        if keys.run_key(config, fingerprint) != key:
            continue  # Another dataset's run.
        if key in existing:
            output = existing[key][0]
            if os.path.exists(os.path.join(output, rundir.METRICS_FILE)):
                continue
        else:
            output = os.path.join(
                runs_dir, keys.run_name(config.to_dict(), config.seed, key)
            )
        settings = dataclasses.replace(config, data=data, output=output).to_dict()
        os.makedirs(output, exist_ok=True)
        if not rundir.started(output):
            rundir.write_json(os.path.join(output, rundir.CONFIG_FILE), settings)
        restored = {k: v for k, v in metrics.items() if k != ARCHIVE_DATASET}
        rundir.write_json(
            os.path.join(output, rundir.METRICS_FILE), dict(restored, config=settings)
        )
        written.append(output)
    return written


def archive_runs(
    results: dict[str, dict],
    archive: str,
    prefix: str,
    kept: dict[str, tuple[str, dict]] | None = None,
) -> list[str]:
    """Add the finished runs (run dir -> metrics.json) that `archive` does not
    hold yet to it, named `<prefix>_<run dir name>` (`run_names.archive_name`) with
    their dataset's fingerprint: a record small enough to commit, from which
    `restore_runs` brings the runs back on another machine. `kept`: what
    `archived_runs(archive)` returned, updated here with what is added (so a
    caller archiving after every run reads the archive once). Returns the
    names added (the files written, for a directory archive)."""
    archive = resolve(archive)
    if kept is None:
        kept = archived_runs(archive)
    directory = os.path.isdir(archive)
    written, added = [], []
    fingerprint_of = functools.cache(keys.data_fingerprint)  # Runs share datasets.
    for run_dir, metrics in sorted(results.items()):
        config = TrainConfig.from_dict(metrics["config"])
        fingerprint = fingerprint_of(config.data)
        key = keys.run_key(config, fingerprint)
        if key in kept:
            continue
        name = run_names.archive_name(prefix, run_dir)
        if directory:
            where = os.path.join(archive, f"{name}.json")
            rundir.write_json(where, dict(metrics, **{ARCHIVE_DATASET: fingerprint}))
        else:
            where = name
            added.append(to_record(metrics, fingerprint, name))
        kept[key] = (where, metrics)
        written.append(where)
    if added:
        append(archive, added)
    return written


def convert(directory: str, path: str) -> tuple[int, list[str]]:
    """Append the runs of a directory archive to the record file `path`.
    Returns how many runs it holds now, and the files left out: those not a
    run's metrics, and runs of a key that another file holds (the packed one
    of a packed and an unpacked run, as `archived_runs` prefers)."""
    kept = archived_runs(directory)
    records = []
    for where, metrics in kept.values():
        config = TrainConfig.from_dict(metrics["config"])
        fingerprint = metrics.get(ARCHIVE_DATASET) or keys.data_fingerprint(config.data)
        name = os.path.splitext(os.path.basename(where))[0]
        records.append(to_record(metrics, fingerprint, name))
    append(path, records)
    used = {os.path.basename(where) for where, _ in kept.values()}
    left_out = sorted(
        name
        for name in os.listdir(directory)
        if name.endswith(".json") and name not in used
    )
    return len(read(path)), left_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Convert a directory of archived runs' metrics.json files "
        "into a record file (one line per run)."
    )
    parser.add_argument("directory", help="The old archive (e.g. results/runs).")
    parser.add_argument("record", help="The record file (e.g. results/runs.jsonl).")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.directory):
        print(f"Not a directory: {args.directory}", file=sys.stderr)
        return 2
    count, left_out = convert(args.directory, args.record)
    size = os.path.getsize(args.record)
    print(f"{args.record}: {count} runs, {size:,} bytes.")
    if left_out:
        print("Left out (not a run's metrics, or a second run of a key):")
        print("\n".join(f"  {name}" for name in left_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
