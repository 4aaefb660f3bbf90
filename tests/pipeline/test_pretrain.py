"""`genni pretrain` then `genni train --init-from`, on tiny generated data."""

import json
import os

import numpy as np
import pytest

from genni.components import schema
from genni.models import s3rec
from genni.pipeline.cli import main as cli
from genni.pipeline.training import data as data_module
from genni.pipeline.training import pretrain, train
from genni.pipeline.training.config import PretrainConfig, TrainConfig
from tests.conftest import make_dataset

MODEL = dict(hidden_size=16, num_layers=1, num_heads=2)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    data, stats = make_dataset(root, num_users=200, num_items=60, seed=7, max_len=8)
    attributes = {
        str(i): [f"brand:{i % 7}", f"category:{i % 5}", f"category:{i % 3 + 10}"]
        for i in range(1, stats["items"] + 1)
        if i % 11  # Some items have no attributes.
    }
    with open(os.path.join(data, schema.ITEM_ATTRIBUTES_FILE), "w") as f:
        json.dump(attributes, f)
    return data, stats


def test_attribute_table(dataset):
    data, stats = dataset
    table, vocabulary = pretrain.load_attributes(data, stats["items"])
    assert len(vocabulary) == 7 + 5 + 3
    assert table.shape == (stats["items"] + 1, 3)
    assert (table[0] == 0).all() and (table[11] == 0).all()
    assert sorted(vocabulary[i - 1] for i in table[1]) == sorted(
        ["brand:1", "category:1", "category:11"]
    )


def test_pretrain_then_finetune_end_to_end(dataset, tmp_path, capsys):
    data, _ = dataset
    pre = tmp_path / "pre"
    flags = ["--hidden-size", "16", "--num-layers", "1", "--num-heads", "2"]
    code = cli.main(
        [
            "pretrain",
            "--data",
            data,
            "--output",
            str(pre),
            "--epochs",
            "2",
            "--batch-size",
            "64",
            "--quiet",
            *flags,
        ]
    )
    assert code == 0
    assert "--init-from" in capsys.readouterr().out
    state = json.loads((pre / pretrain.STATE_FILE).read_text())
    assert state["epoch"] == 2 and state["seconds_per_epoch"] > 0
    first, last = state["history"][0], state["history"][-1]
    assert last["loss"] < first["loss"]  # Pre-training learns something.

    run = tmp_path / "run"
    code = cli.main(
        [
            "train",
            "--data",
            data,
            "--output",
            str(run),
            "--init-from",
            str(pre),
            "--epochs",
            "1",
            "--quiet",
            *flags,
        ]
    )
    assert code == 0
    metrics = json.loads((run / train.METRICS_FILE).read_text())
    assert metrics["config"]["init_from"] == str(pre)
    assert np.isfinite(metrics["test"]["NDCG@10"])


def test_init_from_loads_exactly_the_pretrained_encoder(dataset, tmp_path):
    data, _ = dataset
    pre = str(tmp_path / "pre")
    pretrain.pretrain(
        PretrainConfig.of(data=data, output=pre, epochs=1, batch_size=64, **MODEL),
        verbose=0,
    )
    config = TrainConfig.of(
        data=data, output=str(tmp_path / "r"), init_from=pre, **MODEL
    )
    model = train.build_model(config, data_module.Dataset.open(data))
    loaded = pretrain.initialize(model.encoder, config)
    saved = np.load(os.path.join(pre, pretrain.ENCODER_FILE))
    assert sorted(saved.files) == loaded
    for name, weight in s3rec.encoder_weights(model.encoder).items():
        np.testing.assert_array_equal(weight.numpy(), saved[name])

    # A run with an item tower: the same encoder, its attribute rows afresh.
    tower = TrainConfig.of(
        data=data, output=str(tmp_path / "t"), init_from=pre, item_tower=True, **MODEL
    )
    model = train.build_model(tower, data_module.Dataset.open(data))
    fresh = model.encoder.item_tower.attribute_embedding.embeddings.numpy().copy()
    assert pretrain.initialize(model.encoder, tower) == loaded
    weights = s3rec.encoder_weights(model.encoder)
    for name in loaded:
        np.testing.assert_array_equal(weights[name].numpy(), saved[name])
    tower_rows = model.encoder.item_tower.attribute_embedding.embeddings
    np.testing.assert_array_equal(tower_rows.numpy(), fresh)
    assert set(weights) - set(loaded) == {
        pretrain.TOWER_PREFIX + "attributes/embeddings"
    }
    with pytest.raises(ValueError, match="setting of `genni train`"):
        PretrainConfig.of(data=data, output=pre, item_tower=True)

    wider = TrainConfig.of(
        data=data,
        output=str(tmp_path / "w"),
        init_from=pre,
        **(MODEL | {"hidden_size": 8}),
    )
    with pytest.raises(ValueError, match="hidden_size 16 vs 8"):
        train.train(wider, verbose=0)
    with pytest.raises(FileNotFoundError, match="genni pretrain"):
        train.train(
            TrainConfig.of(
                data=data, output=str(tmp_path / "x"), init_from=str(tmp_path)
            ),
            verbose=0,
        )


def test_pretrain_resume_equals_uninterrupted(dataset, tmp_path, monkeypatch):
    data, _ = dataset

    def config(name, epochs=2):
        return PretrainConfig.of(
            data=data,
            output=str(tmp_path / name),
            epochs=epochs,
            batch_size=64,
            dropout=0.2,
            attention_dropout=0.2,
            **MODEL,
        )

    straight = pretrain.pretrain(config("a"), verbose=0)
    pretrain.pretrain(config("b", epochs=1), verbose=0)  # "Killed" after epoch 1.
    with open(tmp_path / "b" / pretrain.CONFIG_FILE) as f:
        saved = json.load(f)
    saved["epochs"] = 2  # Same run, asked to go on to epoch 2.
    with open(tmp_path / "b" / pretrain.CONFIG_FILE, "w") as f:
        json.dump(saved, f)
    resumed = pretrain.pretrain(config("b"), resume=True, verbose=0)
    assert resumed["history"][-1]["loss"] == pytest.approx(
        straight["history"][-1]["loss"], rel=1e-6
    )
    a = np.load(tmp_path / "a" / pretrain.ENCODER_FILE)
    b = np.load(tmp_path / "b" / pretrain.ENCODER_FILE)
    for name in a.files:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-6, atol=1e-7)


def test_pretrain_without_attributes_is_a_clear_error(tmp_path, capsys):
    data, _ = make_dataset(tmp_path, num_users=60, num_items=20, seed=1, max_len=5)
    code = cli.main(["pretrain", "--data", data, "--output", str(tmp_path / "p")])
    assert code == cli.EXIT_USAGE
    assert "--item-attributes" in capsys.readouterr().err
