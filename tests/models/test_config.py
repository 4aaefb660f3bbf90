"""The encoders' settings, config object and builder."""

import pytest

from genni.components import schema
from genni.models.config import EncoderConfig, ModelConfig, build_encoder
from genni.pipeline.training.config import PretrainConfig, TrainConfig


def test_a_run_gives_the_encoder_of_its_settings_on_its_dataset():
    info = schema.DatasetInfo("d", num_users=5, num_items=30, max_len=12)
    train = TrainConfig.of(data="d", output="o", hidden_size=32, num_heads=4, seed=5)
    config = train.encoder(info)
    assert config == EncoderConfig(
        num_items=30, max_len=12, hidden_size=32, num_layers=2, num_heads=4, seed=5
    )
    encoder = build_encoder(config)
    assert encoder.name == "sasrec"
    assert (encoder.num_items, encoder.max_len) == (30, 12)
    mixed = train.replace(encoder="filtermix", filter_alpha=0.4, filter_window=3)
    encoder = build_encoder(mixed.encoder(info))
    assert encoder.name == "filtermix"
    assert (encoder.filter_alpha, encoder.filter_window) == (0.4, 3)


def test_unknown_encoders_and_bad_mixes_are_refused():
    with pytest.raises(ValueError, match=r"encoder.*sasrec"):
        TrainConfig.of(data="d", output="o", encoder="bert4rec")
    with pytest.raises(ValueError, match="Unknown encoder 'bert4rec'"):
        EncoderConfig(num_items=10, encoder="bert4rec")
    with pytest.raises(ValueError, match="filter_alpha"):
        TrainConfig.of(data="d", output="o", filter_alpha=1.5)
    with pytest.raises(ValueError, match="filter_window"):
        TrainConfig.of(data="d", output="o", filter_window=0)


def test_the_paper_preset_is_the_papers_sasrec():
    from genni.pipeline.training.config import preset

    assert preset("paper")["encoder"] == "sasrec"


def test_pretraining_and_fine_tuning_agree_on_weight_shapes_only():
    info = schema.DatasetInfo("d", num_users=5, num_items=30, max_len=12)
    pre = PretrainConfig.of(data="d", output="p", dropout=0.2, seed=1).encoder(info)
    fine = TrainConfig.of(data="d", output="o").encoder(info)
    assert pre.weight_differences(fine) == []  # Dropout and seed may differ.
    other = TrainConfig.of(
        data="d", output="o", hidden_size=128, num_layers=3, num_heads=4
    ).encoder(info)
    assert pre.weight_differences(
        TrainConfig.of(data="d", output="o", encoder="filtermix").encoder(info)
    ) == ["encoder sasrec vs filtermix"]
    assert pre.weight_differences(other) == [
        "hidden_size 64 vs 128",
        "num_layers 2 vs 3",
        "num_heads 2 vs 4",
    ]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="multiple of `num_heads`"):
        EncoderConfig(num_items=10, hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="multiple of `num_heads`"):
        ModelConfig(hidden_size=30, num_heads=4)  # Checked by its owner.
    with pytest.raises(ValueError, match="multiple of `num_heads`"):
        TrainConfig.of(data="d", output="o", hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="`num_layers` must be at least 1"):
        EncoderConfig(num_items=10, num_layers=0)
