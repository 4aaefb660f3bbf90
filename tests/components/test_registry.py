"""The samplers' one registry: every name builds its layer, others are refused."""

import numpy as np
import pytest

from genni.components.samplers import (
    GenNiSampler,
    PopularitySampler,
    SamplerConfig,
    UniformSampler,
    build_sampler,
    registry,
)
from genni.pipeline.training.config import SAMPLERS, TrainConfig


def test_each_registered_name_builds_its_sampler_with_the_settings():
    expected = {
        "uniform": UniformSampler,
        "popularity": PopularitySampler,
        "genni": GenNiSampler,
    }
    assert registry.names() == tuple(expected)
    for name, cls in expected.items():
        config = SamplerConfig(name=name, num_negatives=3, exclude_seen=True)
        sampler = build_sampler(config, 10, seed=7)
        assert type(sampler) is cls
        assert (sampler.num_items, sampler.num_negatives) == (10, 3)
        assert (sampler.seed, sampler.exclude_seen) == (7, True)
    genni = build_sampler(SamplerConfig(name="genni", alpha=1.5, beta=0.5), 10)
    assert (float(genni.alpha), genni.beta) == (1.5, 0.5)


class Counts:
    """What a sampler's `setup` reads of the training data."""

    def item_counts(self):
        return np.arange(11, dtype=np.float64)


def test_unknown_names_and_missing_counts_are_clear_errors():
    with pytest.raises(ValueError, match=r"`sampler` must be one of.*uniform"):
        SamplerConfig(name="gan")
    with pytest.raises(ValueError, match=r"Unknown sampler 'gan'.*uniform"):
        registry.get("gan")
    popular = build_sampler(SamplerConfig(name="popularity"), 10)
    with pytest.raises(ValueError, match="no item counts"):
        popular(np.zeros([2, 4], np.float32), np.array([1, 2]))
    popular.setup(Counts())  # The setup step fills them.
    assert popular(np.zeros([2, 4], np.float32), np.array([1, 2])).shape == (2, 1)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("genni", registry.get("uniform"))


def test_the_cli_choices_and_the_genni_knobs_come_from_the_registry():
    assert registry.names() == SAMPLERS
    assert registry.model_generated() == ("genni",)
    with pytest.raises(ValueError, match="need --sampler genni"):
        TrainConfig.of(data="d", output="o", sampler="uniform", beta_growth=20.0)
    config = TrainConfig.of(data="d", output="o", seed=3, beta=1.0, beta_growth=20.0)
    # The sampler's beta follows the run's schedule; its stream is the run's.
    assert config.sampler_at(0).beta == pytest.approx(0.001)
    assert config.sampler_at(20).beta == pytest.approx(0.01)
    assert config.sampler_seed == registry.sampler_seed(3, 1)


def test_k_is_capped_at_the_catalog_less_one():
    config = TrainConfig.of(data="d", output="o", num_negatives=64)
    assert config.sampler_at().num_negatives == 64
    assert config.sampler_at(num_items=46).num_negatives == 45
    assert config.sampler_at(num_items=12_101).num_negatives == 64
    # The catalog's own limit then holds for every sampler the run builds.
    for name in SAMPLERS:
        run = TrainConfig.of(data="d", output="o", sampler=name, num_negatives=64)
        sampler = build_sampler(run.sampler_at(num_items=46), 46)
        assert sampler.num_negatives == 45


def test_the_layer_gets_every_setting_its_constructor_names():
    config = SamplerConfig(
        name="genni",
        num_negatives=2,
        alpha=0.5,
        beta=0.5,
        beta_group=3,
        max_logits=1000,
        max_candidates=8,
        successors=2,
        exclude_seen=True,
    )
    layer = build_sampler(config, 50, seed=1)
    for name in ("beta", "beta_group", "max_logits", "max_candidates", "successors"):
        assert getattr(layer, name) == getattr(config, name), name
    assert (layer.num_negatives, layer.exclude_seen, layer.seed) == (2, True, 1)
    assert float(layer.alpha) == 0.5
    assert build_sampler(SamplerConfig(name="popularity", gamma=0.5), 10).gamma == 0.5
