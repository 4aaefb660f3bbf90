"""Run directories shared by `genni train` and `genni pretrain`.

A run directory holds `config.json` (the settings) and `state.json` (progress
at the latest checkpoint). Starting again in the same directory needs
`--resume` and the same settings, so a run never continues with other ones.
One process at a time trains in a directory (`claim`): a second one, by hand
or from a second report grid, is refused instead of writing over the
first one's checkpoints.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator

from genni.pipeline import atomic

CONFIG_FILE = "config.json"
STATE_FILE = "state.json"
METRICS_FILE = "metrics.json"  # Written when a run has finished.
LOCK_FILE = "train.lock"  # Locked while a process trains in the directory.


class RunExistsError(FileExistsError):
    """The run directory already holds a run and --resume was not given."""


class RunBusyError(RuntimeError):
    """Another process is training in the run directory."""


@contextlib.contextmanager
def claim(output: str) -> Iterator[None]:
    """Hold `output` for this process (created if missing) while training.

    An exclusive, non-blocking `flock` on `output/train.lock`: the system
    drops it when the process ends, however it ends, so a killed run leaves
    nothing to clean up and resumes at once. Raises `RunBusyError` while
    another process (or another claim of this one) holds it. Local and
    POSIX-shared file systems only, like the rest of the run directory.

    A run refused before its first weights were saved (a ValueError or
    FileNotFoundError: a dataset, --init-from or --warm-start that does not
    fit) leaves nothing behind when `output` did not exist before: the
    corrected command then starts a new run, not a --resume.
    """
    fresh = not os.path.exists(output)
    try:
        with _locked(output):
            yield
    except (ValueError, FileNotFoundError):
        saved = any(os.path.exists(os.path.join(output, d)) for d in WEIGHT_DIRS)
        if fresh and not saved:
            shutil.rmtree(output, ignore_errors=True)
        raise


# Where a run keeps weights (`train.BEST_DIR`, `train.CHECKPOINT_DIR`).
WEIGHT_DIRS = ("best", "checkpoints")


@contextlib.contextmanager
def _locked(output: str) -> Iterator[None]:
    os.makedirs(output, exist_ok=True)
    path = os.path.join(output, LOCK_FILE)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise RunBusyError(
                f"{output!r} is being trained by another process (pid {holder}); "
                "wait for it to finish or stop it, then --resume."
            ) from None
        try:
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def started(output: str) -> bool:
    """Whether a run (a training or a pre-training) was started in `output`:
    its `config.json` exists, so it is continued with resume, not restarted."""
    return os.path.exists(os.path.join(output, CONFIG_FILE))


def finished(output: str) -> bool:
    """Whether the run in `output` finished: its metrics.json, written after
    its last epoch and the test evaluation (and holding `finished`, the time,
    since runs recorded it), exists. A killed run has best weights but is not
    finished until `--resume` ends it."""
    return os.path.exists(os.path.join(output, METRICS_FILE))


def unfinished_message(output: str) -> str:
    return (
        f"{output!r} is an unfinished run (no {METRICS_FILE}: it stopped before "
        "its last epoch); finish it with `genni train --resume` (its flags)"
    )


def write_json(path: str, value: object) -> None:
    """Write JSON atomically (a killed run never leaves half a file, and
    processes writing the same file never share a temporary one)."""
    with atomic.staged(path, f"{path}.{os.getpid()}.tmp") as tmp, open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def prepare(
    output: str,
    settings: dict,
    resume: bool,
    initial_state: dict,
    defaults: dict | None = None,
) -> dict:
    """The state to start from: `initial_state`, or the saved one on --resume.

    Args:
        output: the run directory (created if missing).
        settings: the run's settings as written to `config.json`; its
            "output" entry is not compared on resume.
        resume: continue the run already in `output`.
        initial_state: the state of a fresh run.
        defaults: settings' defaults; a setting added after the run started
            (missing from its `config.json`) is unchanged at its default.
    """
    os.makedirs(output, exist_ok=True)
    config_path = os.path.join(output, CONFIG_FILE)
    state_path = os.path.join(output, STATE_FILE)
    if os.path.exists(config_path):
        if not resume:
            raise RunExistsError(
                f"{output!r} already holds a run; pass --resume to continue it "
                "or choose another --output."
            )
        saved = read_json(config_path)
        current = {k: v for k, v in settings.items() if k != "output"}
        # A setting added after the run started is unchanged when it is off
        # (or at its default).
        defaults = defaults or {}
        changed = sorted(
            k
            for k in current
            if (
                saved[k] != current[k]
                if k in saved
                else current[k] not in (None, False, defaults.get(k, False))
            )
        )
        if changed:
            was = ", ".join(
                f"{k} {saved.get(k, defaults.get(k))!r} (now {current[k]!r})"
                for k in changed
            )
            raise ValueError(
                f"--resume with different settings ({', '.join(changed)}) than the "
                f"run in {output!r}, which has {was}: pass its settings to resume it."
            )
        if os.path.exists(state_path):
            return read_json(state_path)
    write_json(config_path, settings)
    return initial_state
