"""The Beam commands run on the runner the tests cover, chosen, never
discovered: with no `--runner`, Beam 2.77's DirectRunner would first try to
download Prism (issue 52)."""

from __future__ import annotations

import os
import subprocess
import sys

from apache_beam.options.pipeline_options import StandardOptions

from genni.pipeline import beam_options
from genni.pipeline.preprocess import synthetic


def test_the_runner_is_chosen_unless_given():
    def runner(args):
        return beam_options.pipeline_options(args).view_as(StandardOptions).runner

    assert runner([]) == beam_options.DEFAULT_RUNNER == "FnApiRunner"
    assert runner(None) == "FnApiRunner"
    assert runner(["--runner=PortableRunner"]) == "PortableRunner"
    assert runner(["--runner", "DirectRunner"]) == "DirectRunner"
    assert runner(["--direct_num_workers=2"]) == "FnApiRunner"


def test_preprocess_never_tries_prism(tmp_path):
    log = tmp_path / "log.json"
    synthetic.write_log(
        synthetic.SyntheticConfig(num_users=40, num_items=15, noise_users=0),
        str(log),
    )
    command = [sys.executable, "-m", "genni.pipeline.cli.main", "-v", "preprocess"]
    command += ["--input", str(log), "--output", str(tmp_path / "out")]
    command += ["--min-count", "2"]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = (done.stdout + done.stderr).lower()
    assert "statecache" in said  # -v shows Beam's own log lines ...
    assert "prism" not in said  # ... and none of them is Prism's.


def test_a_job_service_that_stops_answering_is_one_clear_failure():
    """Under load a portable runner's job service can drop the job's state
    stream (gRPC DEADLINE_EXCEEDED): the command says so in one line, and
    that nothing was written, instead of a gRPC traceback."""
    import grpc

    class Dropped(grpc.RpcError):  # As grpc's _MultiThreadedRendezvous answers.
        __module__ = "grpc._channel"

        def code(self):
            return grpc.StatusCode.DEADLINE_EXCEEDED

        def details(self):
            return "Stream removed"

    failed = beam_options.job_failure(Dropped(), "out/data")
    assert "job service stopped answering (DEADLINE_EXCEEDED: Stream removed)" in (
        str(failed)
    )
    assert "Nothing was written to out/data" in str(failed)
    assert beam_options.job_failure(ValueError("bad"), "out") is None
