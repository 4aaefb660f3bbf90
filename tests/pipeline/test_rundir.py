"""Run directories: one process at a time trains in one."""

import os
import subprocess
import sys

import pytest

from genni.pipeline.training import rundir

HOLDER = """
import fcntl, os, sys, time
f = open(sys.argv[1], "a+")
fcntl.flock(f, fcntl.LOCK_EX)
f.truncate(0); f.write(str(os.getpid())); f.flush()
print("held", flush=True)
time.sleep(600)
"""


def test_a_claimed_run_dir_is_refused_until_released(tmp_path):
    output = str(tmp_path / "run")
    with (
        rundir.claim(output),
        pytest.raises(rundir.RunBusyError, match=f"pid {os.getpid()}"),
        rundir.claim(output),
    ):
        pass
    with rundir.claim(output):  # Released: the next one gets it.
        pass


def test_another_process_holds_the_run_until_it_dies(tmp_path):
    output = tmp_path / "run"
    os.makedirs(output)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output / rundir.LOCK_FILE)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(rundir.RunBusyError, match=f"pid {holder.pid}"),
            rundir.claim(str(output)),
        ):
            pass
    finally:
        holder.kill()  # As a killed training run: no clean-up of its own.
        holder.wait()
    with rundir.claim(str(output)):  # The system dropped the dead one's lock.
        pass


def test_a_setting_added_later_resumes_at_its_default(tmp_path):
    output = str(tmp_path / "run")
    os.makedirs(output)
    # A run written before `candidates` existed.
    rundir.write_json(os.path.join(output, rundir.CONFIG_FILE), {"seed": 0})
    rundir.write_json(os.path.join(output, rundir.STATE_FILE), {"epoch": 3})
    defaults = {"seed": 0, "candidates": "new"}
    state = rundir.prepare(
        output, {"seed": 0, "candidates": "new"}, True, {"epoch": 0}, defaults
    )
    assert state == {"epoch": 3}
    with pytest.raises(ValueError, match="candidates"):
        rundir.prepare(
            output, {"seed": 0, "candidates": "all"}, True, {"epoch": 0}, defaults
        )
