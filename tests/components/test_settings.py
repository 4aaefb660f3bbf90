"""One rule of types for every setting: flags, --config JSON, the pipeline's
YAML and tune spaces all go through `settings.coerce` (issue 46)."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genni.components.settings import coerce, constructor_settings
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training.config import TrainConfig


def _train(**values):
    return TrainConfig.of(data="d", output="o", **values)


@pytest.mark.parametrize(
    "given_, key, expected",
    [
        ({"exclude_seen": "false"}, "exclude_seen", False),
        ({"exclude_seen": "True"}, "exclude_seen", True),
        ({"pack": False}, "pack", False),
        ({"learning_rate": "1e-3"}, "learning_rate", 0.001),
        ({"learning_rate": 1}, "learning_rate", 1.0),
        ({"epochs": "8"}, "epochs", 8),
        ({"successors": None}, "successors", None),
    ],
)
def test_values_are_read_by_their_declared_type(given_, key, expected):
    value = _train(**given_).to_dict()[key]
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "given_, message",
    [
        ({"pack": "no"}, "`pack` must be true or false. Got 'no'."),
        ({"exclude_seen": 1}, "`exclude_seen` must be true or false. Got 1."),
        ({"epochs": 1.5}, "`epochs` must be a whole number. Got 1.5."),
        ({"batch_size": True}, "`batch_size` must be a whole number. Got True."),
        ({"learning_rate": "fast"}, "`learning_rate` must be a finite number."),
        ({"learning_rate": float("nan")}, "`learning_rate` must be a finite number"),
        ({"sampler": 3}, "`sampler` must be a string. Got 3."),
        ({"hidden_size": 0}, "`hidden_size` must be at least 1. Got 0."),
    ],
)
def test_a_wrong_type_names_the_setting_the_value_and_what_is_allowed(given_, message):
    with pytest.raises(ValueError) as info:
        _train(**given_)
    assert message in str(info.value)
    assert "Config(" not in str(info.value)  # Never the whole config.


def test_preprocess_settings_follow_the_same_rule():
    config = PreprocessConfig("in", "out", min_count="3", split="time", test_days="7")
    assert config.min_count == 3 and config.test_days == 7.0
    with pytest.raises(ValueError, match="`overwrite` must be true or false"):
        PreprocessConfig("in", "out", overwrite="yes")


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["true", "false", "1e-3", "8", " 8 ", "-0", "inf", "nan"]),
)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([bool, int, float, str, int | None]), value=VALUES)
def test_coerce_gives_its_type_or_a_clear_error(kind, value):
    """Random values: the declared type comes back, or a ValueError that
    names the setting; never another exception, never a bool as a number."""
    try:
        out = coerce("some_setting", kind, value)
    except ValueError as e:
        assert str(e).startswith("`some_setting` must be")
        return
    if out is None:
        assert value is None and kind == int | None
        return
    wanted = int if kind == int | None else kind
    assert type(out) is wanted
    if wanted is float:
        assert math.isfinite(out)
    if wanted in (int, float):
        assert not isinstance(value, bool)
    if wanted is bool:
        assert isinstance(value, bool) or value.strip().lower() in ("true", "false")
    if wanted is int and isinstance(value, float):
        pytest.fail(f"an int from the float {value!r}")


@settings(max_examples=200, deadline=None)
@given(
    values=st.dictionaries(
        st.sampled_from(["epochs", "learning_rate", "pack", "dropout", "sampler"]),
        VALUES,
        max_size=3,
    )
)
def test_random_train_settings_end_in_a_config_or_a_value_error(values):
    try:
        config = _train(**values)
    except ValueError:
        return
    assert config.to_dict()["epochs"] >= 1


SECTION_KEYS = {
    "train": ["epochs", "pack", "sampler", "alpha", "preset"],
    "export": ["k", "split", "max_regression", "candidates"],
    "tune": ["max_trials", "oracle", "pack", "space"],
    "preprocess": ["min_count", "split", "test_days", "max_len"],
}


@settings(max_examples=150, deadline=None)
@given(
    sections=st.fixed_dictionaries(
        {},
        optional={
            name: st.dictionaries(st.sampled_from(keys), VALUES, max_size=3)
            for name, keys in SECTION_KEYS.items()
        },
    )
)
def test_random_pipeline_sections_are_accepted_or_refused_by_name(sections):
    """Any values in any section: checked, or a ValueError naming a
    setting, a section or a preset; never another exception."""
    from genni.pipeline.loop import config

    try:
        config.check({"input": "x", "workdir": "w", **sections})
    except ValueError as e:
        assert "`" in str(e) or "preset" in str(e) or "--" in str(e), str(e)


class _Framework:
    def __init__(self, unrelated=0, name=None):
        pass


class _Base(_Framework):
    def __init__(self, width, *, depth=2, **kwargs):
        super().__init__(**kwargs)


class _Member(_Base):
    def __init__(self, width, rate=0.5, name=None, **kwargs):
        super().__init__(width, **kwargs)


@dataclasses.dataclass
class _Settings:
    name: str = "member"
    width: int = 8
    depth: int = 3
    rate: float = 0.1
    unrelated: int = 7
    other: int = 1


def test_a_layer_gets_the_settings_its_constructors_name_up_to_its_base():
    settings = constructor_settings(_Member, _Settings(), up_to="_Base")
    # Its own and its base's (keyword-only too); never the framework's above
    # the base, never Keras' `name`, never a setting no constructor names.
    assert settings == {"width": 8, "depth": 3, "rate": 0.1}
    assert constructor_settings(_Base, _Settings(), up_to="_Base") == {
        "width": 8,
        "depth": 3,
    }
