"""Run directories shared by `genni train` and `genni pretrain`.

A run directory holds `config.json` (the settings) and `state.json` (progress
at the latest checkpoint). Starting again in the same directory needs
`--resume` and the same settings, so a run never continues with other ones.
"""

from __future__ import annotations

import json
import os

CONFIG_FILE = "config.json"
STATE_FILE = "state.json"
METRICS_FILE = "metrics.json"  # Written when a run has finished.


class RunExistsError(FileExistsError):
    """The run directory already holds a run and --resume was not given."""


def write_json(path: str, value: object) -> None:
    """Write JSON atomically (a killed run never leaves half a file)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def prepare(output: str, settings: dict, resume: bool, initial_state: dict) -> dict:
    """The state to start from: `initial_state`, or the saved one on --resume.

    Args:
        output: the run directory (created if missing).
        settings: the run's settings as written to `config.json`; its
            "output" entry is not compared on resume.
        resume: continue the run already in `output`.
        initial_state: the state of a fresh run.
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
        # A setting added after the run started is unchanged when it is off.
        changed = sorted(
            k
            for k in current
            if (
                saved[k] != current[k]
                if k in saved
                else current[k] not in (None, False)
            )
        )
        if changed:
            raise ValueError(
                f"--resume with different settings ({', '.join(changed)}) than the "
                f"run in {output!r}."
            )
        if os.path.exists(state_path):
            return read_json(state_path)
    write_json(config_path, settings)
    return initial_state
