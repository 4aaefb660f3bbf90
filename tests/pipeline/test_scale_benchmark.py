"""benchmarks/scale.py's pieces on small sizes: a stage's wall time and peak
memory, a failing stage's clear error, the served histories and the table."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scale


def test_a_stage_reports_its_time_and_the_peak_memory_of_its_process(tmp_path):
    # This process is large (as the suite's is, and scale.py's once serving
    # imported TensorFlow): a stage's peak is its own, not a share of ours.
    ballast = bytearray(500 * 1024 * 1024)
    ballast[::4096] = b"1" * len(ballast[::4096])
    grow = "x = bytearray(300 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096])"
    big = scale.run_stage("big", [sys.executable, "-c", grow], str(tmp_path))
    small = scale.run_stage("small", [sys.executable, "-c", "pass"], str(tmp_path))
    assert big["stage"] == "big" and big["seconds"] > 0
    assert big["peak_rss_gib"] > 0.29 > small["peak_rss_gib"]
    assert (tmp_path / "big.log").exists()
    del ballast


def test_a_failing_stage_stops_the_run_with_its_logs_tail(tmp_path):
    fail = "import sys; print('the reason'); sys.exit(3)"
    with pytest.raises(RuntimeError, match=r"(?s)Stage bad failed \(3\).*the reason"):
        scale.run_stage("bad", [sys.executable, "-c", fail], str(tmp_path))


def test_stage_commands_are_shown_as_genni_commands():
    assert (
        scale.shown([*scale.GENNI, "train", "--data", "a b"])
        == "genni train --data 'a b'"
    )


def test_histories_are_the_users_items_before_their_valid_and_test(tmp_path):
    (tmp_path / "sequences.tsv").write_text("U1\ta b c d\nU2\tx y z\nU3\tp q r\n")
    assert scale.histories_of(str(tmp_path), 2) == [["a", "b"], ["x"]]


def test_the_table_names_every_stage_and_the_slowest():
    stage = lambda name, s: {"stage": name, "seconds": s, "peak_rss_gib": 0.5}  # noqa: E731
    latency = {"p50_ms": 1.0, "p99_ms": 2.0, "failures": 0}
    results = {
        "dataset": {"users": 10, "items": 5, "events": 50},
        "machine": {"cpus": 2},
        "settings": {"min_count": 3},
        "stages": [
            stage("preprocess", 3.0),
            stage("train_genni", 9.0),
            dict(stage("serve", 1.0), latency={"rest_c1": latency}),
            dict(
                stage("serve_ann", 1.0),
                latency={"grpc_c8": latency},
                recall_at_10=0.9876,
                index={"kind": "ivf", "nlist": 8, "nprobe": 2, "build_seconds": 3.0},
            ),
        ],
        "samplers": {
            "genni": {
                "ms_per_step": 12.0,
                "seconds_per_epoch": 1.2,
                "epochs_run": 2,
                "test": {"HR@10": 50.0, "NDCG@10": 30.0},
            }
        },
        "command": "python benchmarks/scale.py --items 5",
    }
    text = scale.markdown(results)
    assert "| preprocess | 3.0 | 0.50 |" in text and "**train_genni** (9 s)" in text
    assert "| genni | 12 | 1.2 | 2 | 50.00 | 30.00 |" in text
    assert "| rest_c1 | brute force | 1.0 | 2.0 | 0 |" in text
    assert "| grpc_c8 | ANN index | 1.0 | 2.0 | 0 |" in text
    assert "ivf (nlist 8, nprobe 2), built in 3 s" in text and "**0.988**" in text
    assert "Command: `python benchmarks/scale.py --items 5`" in text


def test_the_recorded_command_names_what_differs_from_the_defaults():
    args = scale.build_parser().parse_args(
        ["--items", "10", "--users", "5", "--genni-flags", "--max-candidates 0"]
    )
    assert scale.command_line(args) == (
        "python benchmarks/scale.py --items 10 --users 5 --epochs 1 "
        "--genni-flags '--max-candidates 0'"
    )


def test_resume_keeps_a_finished_stage_and_runs_an_unfinished_one(tmp_path):
    mark = tmp_path / "ran"
    touch = [sys.executable, "-c", f"open({str(mark)!r}, 'a').write('x')"]
    first = scale.run_stage("done", touch, str(tmp_path))
    again = scale.run_stage("done", touch, str(tmp_path), resume=True)
    assert again == first and mark.read_text() == "x"  # Not run twice.
    scale.run_stage("done", touch, str(tmp_path))  # Without --resume it runs.
    assert mark.read_text() == "xx"
    assert not scale.finished(str(tmp_path), "other")


def test_resume_needs_the_workdir_of_the_run():
    with pytest.raises(SystemExit):
        scale.main(["--resume"])
