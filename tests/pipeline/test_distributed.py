"""`genni train` under tf.distribute.MirroredStrategy with two replicas.

Two logical CPU devices stand in for two GPUs. They must be configured before
TensorFlow starts its runtime, which the other tests have done in this
process, so the training runs in a child process.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_dataset

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)
from pipeline import data, schema, train
from pipeline.configs import TrainConfig

data_dir, out = sys.argv[1], sys.argv[2]
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices)


def config(name):
    return TrainConfig(
        data=data_dir, output=f"{out}/{name}", epochs=5, hidden_size=16,
        num_layers=1, batch_size=64, learning_rate=0.005, dropout=0.1,
        attention_dropout=0.1, patience=10, sampler="genni", alpha_step=0.05,
    )


straight = train.train(config("straight"), verbose=0, strategy=strategy)
original = train._log_epoch


def killed_in_epoch_3(writer, record):
    if record["epoch"] == 3:
        raise KeyboardInterrupt
    original(writer, record)


train._log_epoch = killed_in_epoch_3
try:
    train.train(config("killed"), verbose=0, strategy=strategy)
except KeyboardInterrupt:
    pass
train._log_epoch = original
resumed = train.train(config("killed"), resume=True, verbose=0, strategy=strategy)

# The self-adjusted alpha is a mirrored variable: its copies must stay equal.
info = schema.DatasetInfo.load(data_dir)
with strategy.scope():
    model = train.build_model(config("fit"), info, None)
records = data.records(data_dir, schema.TRAIN)
batches = data.train_dataset(records, info.max_len, 64, 0, 0)
model.fit(batches, epochs=2, verbose=0)
alphas = [float(a) for a in strategy.experimental_local_results(model.sampler.alpha)]
print(json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "straight": straight,
    "resumed": resumed,
    "alphas": alphas,
    "items": info.num_items,
}))
"""


@pytest.fixture(scope="module")
def distributed(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    data, _ = make_dataset(root, num_users=500, num_items=150, seed=5, max_len=10)
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, data, str(root / "runs")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_mirrored_training_beats_a_random_ranking(distributed):
    assert distributed["replicas"] == 2
    random_hr10 = 100 * 10 / distributed["items"]
    assert distributed["straight"]["test"]["HR@10"] > 2 * random_hr10


def test_mirrored_run_resumes_where_it_would_have_ended(distributed):
    straight, resumed = distributed["straight"], distributed["resumed"]
    assert resumed["epochs_run"] == straight["epochs_run"] == 5
    for split in ("valid", "test"):
        for name, value in straight[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-6), name


def test_self_adjusted_alpha_stays_equal_on_every_replica(distributed):
    first, second = distributed["alphas"]
    assert first == second
    assert first != 2.5  # It moved.
