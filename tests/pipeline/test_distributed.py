"""`genni train` under tf.distribute.MirroredStrategy with two replicas (the
multi-worker strategy: test_multi_worker.py).

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

# Shared by the child scripts: a tiny GenNi run trained straight, and the same
# run killed in `kill_epoch` then resumed.
RUNS = """
from genni.pipeline.training import train
from genni.pipeline.training.config import TrainConfig


def tiny_config(name, **settings):
    return TrainConfig.of(
        data=data_dir, output=f"{out}/{name}", hidden_size=16, num_layers=1,
        learning_rate=0.005, dropout=0.1, attention_dropout=0.1, patience=10,
        sampler="genni", **settings,
    )


def straight_and_resumed(strategy, kill_epoch, **settings):
    # The two runs' metrics, and the straight run's model.
    built, build = [], train.build_model
    train.build_model = lambda *a, **k: built.append(build(*a, **k)) or built[-1]
    straight = train.train(
        tiny_config("straight", **settings), verbose=0, strategy=strategy
    )
    train.build_model = build
    original = train._log_epoch

    def killed(writer, record):
        if record["epoch"] == kill_epoch:
            raise KeyboardInterrupt
        original(writer, record)

    train._log_epoch = killed
    try:
        train.train(tiny_config("killed", **settings), verbose=0, strategy=strategy)
    except KeyboardInterrupt:
        pass
    train._log_epoch = original
    with open(f"{out}/killed/{train.STATE_FILE}") as f:  # Resumed, not restarted.
        assert json.load(f)["epoch"] == kill_epoch - 1, "killed before a checkpoint"
    resumed = train.train(
        tiny_config("killed", **settings), resume=True, verbose=0, strategy=strategy
    )
    return straight, resumed, built[0]
"""

SCRIPT = """
import json, sys
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)
from genni.pipeline.training import data, train

data_dir, out, parts = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = tf.distribute.MirroredStrategy(devices)
"""
SCRIPT += RUNS
SCRIPT += """
result = {"replicas": strategy.num_replicas_in_sync}
if "train" in parts:
    straight, resumed, model = straight_and_resumed(  # Killed in its last epoch.
        strategy, epochs=2, kill_epoch=2, batch_size=63, alpha_step=0.05
    )
    result.update(straight=straight, resumed=resumed)
    result["items"] = data.Dataset.open(data_dir).info.num_items
    # The self-adjusted alpha is a mirrored variable: equal on every replica
    # after the straight run's two epochs.
    local = strategy.experimental_local_results(model.sampler.alpha)
    result["alphas"] = [float(a) for a in local]

if "pretrain" in parts:  # S3-Rec pre-training, killed in epoch 2 and resumed.
    from genni.models import s3rec
    from genni.pipeline.training import pretrain
    from genni.pipeline.training.config import PretrainConfig

    def pre_config(name):  # Odd batches: replicas see unequal shapes.
        return PretrainConfig.of(
            data=data_dir, output=f"{out}/{name}", epochs=2, hidden_size=16,
            num_layers=1, batch_size=63,
        )

    pre_straight = pretrain.pretrain(pre_config("pre"), verbose=0, strategy=strategy)
    save = s3rec.save_encoder_weights

    def killed_in_epoch_2(encoder, path):  # After its checkpoint, before state.
        if len(pretrain.tf.train.get_checkpoint_state(
            f"{out}/pre_killed/checkpoints").all_model_checkpoint_paths) == 2:
            raise KeyboardInterrupt
        save(encoder, path)

    s3rec.save_encoder_weights = killed_in_epoch_2
    try:
        pretrain.pretrain(pre_config("pre_killed"), verbose=0, strategy=strategy)
    except KeyboardInterrupt:
        pass
    s3rec.save_encoder_weights = save
    with open(f"{out}/pre_killed/{pretrain.STATE_FILE}") as f:
        result["killed_at"] = json.load(f)["epoch"]  # Where the resume starts.
    pre_resumed = pretrain.pretrain(
        pre_config("pre_killed"), resume=True, verbose=0, strategy=strategy
    )
    result["pretrain"] = [pre_straight["history"], pre_resumed["history"]]
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def mirrored_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    data, stats = make_dataset(root, num_users=300, num_items=150, seed=5, max_len=10)
    attributes = {
        str(i): [f"brand:{i % 7}", f"category:{i % 5}"]
        for i in range(1, stats["items"] + 1)
    }
    with open(os.path.join(data, "item_attributes.json"), "w") as f:
        json.dump(attributes, f)
    return root, data


def _mirrored(root, data, part):
    """The parts of SCRIPT ("train,pretrain") under MirroredStrategy over two
    logical CPUs, in one child process (one TensorFlow start-up)."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, data, str(root / part.replace(",", "_")), part],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    return result


@pytest.fixture(scope="module")
def distributed(mirrored_data):
    return _mirrored(*mirrored_data, "train,pretrain")


def test_mirrored_training_beats_a_random_ranking(distributed):
    assert distributed["replicas"] == 2
    random_hr10 = 100 * 10 / distributed["items"]
    assert distributed["straight"]["test"]["HR@10"] > 2 * random_hr10


def test_mirrored_run_resumes_where_it_would_have_ended(distributed):
    """Batches of 63 split 32 / 31: replicas draw dropout for unequal shapes,
    and resume on the streams an uninterrupted run would have used."""
    straight, resumed = distributed["straight"], distributed["resumed"]
    assert resumed["epochs_run"] == straight["epochs_run"] == 2
    for a, b in zip(straight["history"], resumed["history"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6), a["epoch"]
    for split in ("valid", "test"):
        for name, value in straight[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-6), name


def test_mirrored_pretraining_learns_and_resumes_where_it_would_have_ended(
    distributed,
):
    result = distributed
    assert result["killed_at"] == 1  # Epoch 2 resumed from epoch 1's checkpoint.
    straight, resumed = result["pretrain"]
    assert [r["epoch"] for r in resumed] == [1, 2]
    assert straight[-1]["loss"] < straight[0]["loss"]
    for a, b in zip(straight, resumed, strict=True):
        for name in ("loss", "aap", "mip", "map", "sp"):
            assert b[name] == pytest.approx(a[name], rel=1e-6), (a["epoch"], name)


def test_self_adjusted_alpha_stays_equal_on_every_replica(distributed):
    first, second = distributed["alphas"]
    assert first == second
    assert first != 2.5  # It moved.
