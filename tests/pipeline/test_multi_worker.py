"""`genni train` under MultiWorkerMirroredStrategy with two worker processes
on this machine (apart from the mirrored tests, so that xdist runs both files
at once)."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import make_dataset
from tests.pipeline.test_distributed import ROOT, RUNS

# Two worker processes on this machine: TF_CONFIG names both, as it would name
# two machines. Each trains, is killed in epoch 2, resumes; the chief (worker
# 0) writes the run, worker 1 keeps its checkpoints apart.
WORKER_SCRIPT = """
import json, sys
from genni.pipeline.training import train

data_dir, out = sys.argv[1], sys.argv[2]
strategy = train.make_strategy("multi_worker")
"""
WORKER_SCRIPT += RUNS
WORKER_SCRIPT += """
straight, resumed, _ = straight_and_resumed(  # Killed in its last epoch.
    strategy, epochs=2, kill_epoch=2, batch_size=64
)
print(json.dumps({
    "task": train.worker_task(strategy),
    "replicas": strategy.num_replicas_in_sync,
    "straight": straight,
    "resumed": resumed,
}))
"""


def _free_ports(count):
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def multi_worker(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi_worker")
    data, _ = make_dataset(root, num_users=300, num_items=80, seed=3, max_len=10)
    workers = [f"localhost:{p}" for p in _free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {
            "cluster": {"worker": workers},
            "task": {"type": "worker", "index": index},
        }
        env = dict(
            os.environ,
            TF_USE_LEGACY_KERAS="1",
            PYTHONPATH=str(ROOT),
            TF_CONFIG=json.dumps(tf_config),
        )
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER_SCRIPT, data, str(root / "runs")],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=ROOT,
            )
        )
    try:
        outputs = [p.communicate(timeout=600) for p in processes]
    finally:  # One failed worker leaves the other waiting for it.
        for p in processes:
            p.kill()
    results = []
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    return root / "runs", results


def test_multi_worker_training_is_one_run_written_by_the_chief(multi_worker):
    runs, (chief, worker) = multi_worker
    assert chief["task"] is None and worker["task"] == "worker_1"
    assert chief["replicas"] == worker["replicas"] == 2
    # Both workers hold the same model: the same metrics.
    assert worker["straight"]["test"] == chief["straight"]["test"]
    assert chief["straight"]["test"]["HR@10"] > 0
    for name in ("straight", "killed"):
        saved = json.loads((runs / name / "metrics.json").read_text())
        assert saved["test"] == chief[name if name == "straight" else "resumed"]["test"]
        assert not (runs / name / "workers").exists()  # Worker 1 cleaned up.


def test_multi_worker_run_resumes_where_it_would_have_ended(multi_worker):
    _, (chief, worker) = multi_worker
    for result in (chief, worker):
        straight, resumed = result["straight"], result["resumed"]
        assert resumed["epochs_run"] == straight["epochs_run"] == 2
        for split in ("valid", "test"):
            for name, value in straight[split].items():
                assert resumed[split][name] == pytest.approx(value, abs=1e-6), name


def test_multi_worker_needs_tf_config(monkeypatch):
    from genni.pipeline.training import train

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        train.make_strategy("multi_worker")
