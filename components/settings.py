"""Settings classes: each setting declared once, with its help and its check.

A settings class is a frozen dataclass (`Settings`) whose fields are declared
with `setting(default, help, ...)`. From the fields alone:

- `from_dict` / `to_dict`: the flat form (`config.json`, `--config` files, the
  pipeline's YAML, presets), where a nested settings class (`nested`) lends
  its fields to its parent's keys: `TrainConfig.from_dict({"alpha": 1.0,
  "hidden_size": 32})` fills its sampler's alpha and its model's width;
- `add_flags` / `flag_values`: the command-line flags of a settings class;
- each value is converted by its declared type and checked once, by the
  class that owns it (`coerce`, its field's `check`, then the class's
  `validate` for rules between its fields): the same rule for flags,
  `--config` JSON, the pipeline's YAML and `tune` spaces. A bool is read from
  true/false only (or "true"/"false"), an int never from 1.5 or true, a float
  from 1e-3 or "1e-3" (finite only), a string never from a number.

Adding a setting is one field, the code that reads it, and a test: the flag,
its `--help`, `config.json` and the run key follow from the field. No
TensorFlow here: `--help` and settings checks stay light.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pydantic

MISSING = dataclasses.MISSING

# How each declared type is named in an error.
_KIND_WORDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a finite number",
    str: "a string",
}
_INTEGER = re.compile(r"[+-]?\d+")


def _from_text(kind: type, value: Any) -> Any:
    """What a string of a config file means for `kind` (itself if nothing)."""
    if not isinstance(value, str) or kind is str:
        return value
    text = value.strip()
    if kind is bool:
        return {"true": True, "false": False}.get(text.lower(), value)
    if kind is int:
        return int(text) if _INTEGER.fullmatch(text) else value
    if kind is float:
        try:
            return float(text)
        except ValueError:
            return value
    return value


@functools.cache
def _adapter(kind: type) -> pydantic.TypeAdapter:
    """Pydantic's strict check of `kind` (no bool for a number, no number for
    a string, no 1.5 for an int), after `_from_text`."""
    extra: tuple = (pydantic.Strict(),)
    if kind is float:
        extra += (pydantic.AllowInfNan(False),)
    parse = pydantic.BeforeValidator(functools.partial(_from_text, kind))
    return pydantic.TypeAdapter(Annotated[kind, parse, *extra])


def coerce(key: str, annotation: Any, value: Any) -> Any:
    """`value` as the setting `key` of type `annotation` (int, float, str,
    bool, or one of them | None) holds it; ValueError naming the setting, the
    value and what is allowed."""
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = bool(kinds) and len(kinds) < len(typing.get_args(annotation))
    kind = kinds[0] if kinds else annotation
    if value is None and optional:
        return None
    if kind not in _KIND_WORDS:
        return value
    try:
        return _adapter(kind).validate_python(value)
    except pydantic.ValidationError:
        allowed = _KIND_WORDS[kind] + (" or null" if optional else "")
        raise ValueError(f"`{key}` must be {allowed}. Got {value!r}.") from None


def coerce_fields(settings: Any) -> None:
    """Convert each field of the frozen dataclass `settings` in place by its
    annotation (`coerce`); for dataclasses that are not `Settings`."""
    hints = typing.get_type_hints(type(settings))
    for f in dataclasses.fields(settings):
        value = coerce(f.name, hints[f.name], getattr(settings, f.name))
        object.__setattr__(settings, f.name, value)


@dataclasses.dataclass(frozen=True)
class Check:
    """A test a set value (not None) must pass, and what it requires."""

    test: Callable[[Any], bool]
    requirement: str


def at_least(low: float) -> Check:
    return Check(lambda v: v >= low, f"at least {low:g}")


POSITIVE = Check(lambda v: v > 0, "positive")
NON_NEGATIVE = Check(lambda v: v >= 0, "non-negative")


def within(low: float, high: float, low_open: bool, high_open: bool) -> Check:
    """In the interval between `low` and `high`, each end open or closed."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"

    def test(v):
        return (v > low if low_open else v >= low) and (
            v < high if high_open else v <= high
        )

    return Check(test, f"in {left}{low:g}, {high:g}{right}")


def setting(
    default: Any = MISSING,
    help: str = "",
    *,
    check: Check | None = None,
    choices: tuple | Callable[[], tuple] | None = None,
    flag: str | None = "",
    metavar: str | None = None,
    key: str | None = None,
    off: Any = None,
    exclusive: str | None = None,
    follows: str | None = None,
    layout: bool = False,
    two_way: bool = False,
) -> Any:
    """A settings field.

    Args:
        default: its value when not given (MISSING: required).
        help: what it does, for `--help` (no measured figures: they live in
            docs/ and benchmarks/results/).
        check: what a set value must pass (`at_least(1)`, `POSITIVE`, ...).
        choices: the values allowed (a function of none for choices known
            only at run time, e.g. the registered samplers).
        flag: its command-line flag; "" derives `--name-with-dashes`, None
            gives it none.
        metavar: the flag's value placeholder.
        key: its name in the flat form, if not the field's.
        off: the flag value that means None (`--successors 0`: off).
        exclusive: flags sharing this name are mutually exclusive.
        follows: the setting whose given value it takes when it is not given
            itself (`attention_dropout` follows `dropout`).
        layout: how a run computes, not what: it leaves the run key alone.
        two_way: a bool whose default depends on the run (a preset's rule on
            the dataset): both `--name` and `--no-name`.
    """
    metadata = {
        "help": help,
        "check": check,
        "choices": choices,
        "flag": flag,
        "metavar": metavar,
        "key": key,
        "off": off,
        "exclusive": exclusive,
        "follows": follows,
        "layout": layout,
        "two_way": two_way,
    }
    return dataclasses.field(default=default, metadata=metadata)


def nested(cls: type) -> Any:
    """A field holding another settings class, whose keys join its parent's."""
    return dataclasses.field(default_factory=cls, metadata={"nested": cls})


@dataclasses.dataclass(frozen=True)
class Field:
    """One setting of a (possibly nested) settings class, in the flat form."""

    key: str
    path: tuple[str, ...]  # Attribute names from the outer class.
    field: dataclasses.Field
    type: Any  # The annotation, e.g. int | None.

    @property
    def meta(self) -> typing.Mapping:
        return self.field.metadata

    @property
    def default(self) -> Any:
        return self.field.default

    @property
    def value_type(self) -> type:
        """int, float, str or bool: the annotation without its None."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        return args[0] if args else self.type

    def choices(self) -> tuple | None:
        choices = self.meta.get("choices")
        return choices() if callable(choices) else choices


class Settings:
    """Base of a frozen settings dataclass (see the module's docstring)."""

    KIND = "settings"

    def __post_init__(self) -> None:
        for f in _own_fields(type(self)):
            value = coerce(f.key, f.type, getattr(self, f.path[-1]))
            object.__setattr__(self, f.path[-1], value)
            choices = f.choices()
            if choices is not None and value not in choices:
                raise ValueError(f"`{f.key}` must be one of {choices}. Got {value!r}.")
            check = f.meta.get("check")
            if check is not None and value is not None and not check.test(value):
                raise ValueError(f"`{f.key}` must be {check.requirement}. Got {value}.")
        self.validate()

    def validate(self) -> None:
        """Rules between this class's own settings (none here)."""

    @classmethod
    def fields(cls) -> list[Field]:
        """Every setting, nested ones included, in declaration order."""
        return list(_walk(cls, ()))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.key for f in cls.fields())

    @classmethod
    def defaults(cls) -> dict:
        """Each setting's default (settings without one are left out)."""
        return {f.key: f.default for f in cls.fields() if f.default is not MISSING}

    @classmethod
    def from_dict(cls, values: dict):
        """The settings of a flat dict; unknown names are an error."""
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise ValueError(f"Unknown {cls.KIND}: {', '.join(unknown)}.")
        return _build(cls, values)

    @classmethod
    def of(cls, **values):
        """`from_dict(values)`: `TrainConfig.of(data=D, output=O, alpha=1.0)`."""
        return cls.from_dict(values)

    def to_dict(self) -> dict:
        """The flat form: every setting by its key (`config.json`)."""
        out = {}
        for f in self.fields():
            value = self
            for name in f.path:
                value = getattr(value, name)
            out[f.key] = value
        return out

    def replace(self, **changes):
        """A copy with `changes` (flat keys), checked again."""
        return type(self).from_dict(self.to_dict() | changes)


def _walk(cls: type, path: tuple[str, ...]) -> Iterator[Field]:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner = f.metadata.get("nested")
        if inner is not None:
            yield from _walk(inner, (*path, f.name))
        else:
            yield Field(
                f.metadata.get("key") or f.name, (*path, f.name), f, hints[f.name]
            )


def _own_fields(cls: type) -> list[Field]:
    """The settings a class holds itself (not those of its nested classes)."""
    return [f for f in _walk(cls, ()) if len(f.path) == 1]


def _build(cls: type, values: dict):
    kwargs = {}
    for f in dataclasses.fields(cls):
        inner = f.metadata.get("nested")
        if inner is not None:
            kwargs[f.name] = _build(inner, values)
        else:
            key = f.metadata.get("key") or f.name
            if key in values:
                kwargs[f.name] = values[key]
    return cls(**kwargs)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def default_text(key: str, defaults: dict, others: dict[str, dict]) -> str:
    """'default 64' or 'default 64 in the recommended preset, 1 in the paper's'."""
    if key not in defaults or defaults[key] is MISSING:
        return ""
    value = defaults[key]
    differ = {name: d[key] for name, d in others.items() if d.get(key) != value}
    if not differ:
        return f"default {_shown(value)}"
    parts = [f"{_shown(v)} in the {name} preset" for name, v in differ.items()]
    return f"default {_shown(value)}; " + ", ".join(parts)


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    defaults: dict | None = None,
    others: dict[str, dict] | None = None,
    skip: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
) -> None:
    """One flag per setting of `cls` that has one (`setting(flag=...)`).

    Every flag defaults to None, so that `flag_values` knows what was given;
    `defaults` (the settings a run gets when no flag is given) and `others`
    (named alternatives, e.g. the paper preset's) word each flag's default.
    `required`: keys whose flag must be given.
    """
    defaults = cls.defaults() if defaults is None else defaults
    groups: dict[str, Any] = {}
    for f in cls.fields():
        flag = f.meta.get("flag", "")
        if flag is None or f.key in skip:
            continue
        target = parser
        if f.meta.get("exclusive"):
            name = f.meta["exclusive"]
            if name not in groups:
                groups[name] = parser.add_mutually_exclusive_group()
            target = groups[name]
        kind = f.value_type
        text = f.meta.get("help", "")
        shown = default_text(f.key, defaults, others or {})
        if kind is bool and shown.count(";") == 0:  # The flag says it.
            shown = ""
        if f.meta.get("off") is not None:
            shown = f"{f.meta['off']}: off" + (f"; {shown}" if shown else "")
        help_text = f"{text} ({shown})" if shown else text
        options: dict[str, Any] = {"dest": f.key, "default": None, "help": help_text}
        if kind is bool and f.meta.get("two_way"):
            flag = flag or "--" + f.key.replace("_", "-")
            options["action"] = argparse.BooleanOptionalAction
        elif kind is bool:
            negated = defaults.get(f.key, f.default) is True
            flag = flag or ("--no-" if negated else "--") + f.key.replace("_", "-")
            options["action"] = "store_false" if negated else "store_true"
        else:
            flag = flag or "--" + f.key.replace("_", "-")
            options["type"] = kind
            if f.choices() is not None:
                options["choices"] = f.choices()
            if f.meta.get("metavar"):
                options["metavar"] = f.meta["metavar"]
        if f.key in required:
            options["required"] = True
            options.pop("default")
        target.add_argument(flag, **options)


def flag_values(args: argparse.Namespace, cls: type) -> dict:
    """The settings given as flags (flat keys), `off` values as None."""
    values = {}
    for f in cls.fields():
        value = getattr(args, f.key, None)
        if value is None or f.meta.get("flag", "") is None:
            continue
        off = f.meta.get("off")
        values[f.key] = None if off is not None and value == off else value
    return values


def with_followers(cls: type, values: dict) -> dict:
    """`values` where a setting that `follows` a given one, and is not given
    itself, takes its value (`--dropout 0.2` sets the attention's too)."""
    values = dict(values)
    for f in cls.fields():
        source = f.meta.get("follows")
        if source and values.get(source) is not None and f.key not in values:
            values[f.key] = values[source]
    return values


def read_file(path: str, flag: str) -> dict:
    """The mapping in the YAML or JSON file `path` (JSON is YAML), given as
    `flag`: a file that cannot be read, is not YAML/JSON, repeats a key (at
    any depth) or holds no mapping is a ValueError naming it."""
    import yaml

    class _Loader(yaml.SafeLoader):
        """PyYAML's safe loader, except that a repeated key is an error
        instead of silently taking the last value."""

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    _Loader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
        lambda loader, node: mapping(loader, node, deep=True),
    )
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise ValueError(f"Cannot read {flag} {path!r}: {e.strerror}.") from None
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{flag} {path!r} is not UTF-8 text (byte {e.start}): a YAML or JSON "
            "file is expected."
        ) from None
    try:
        loaded = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ValueError(f"{flag} {path!r} is not YAML/JSON: {e}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{flag} {path!r} must hold a mapping (name: value).")
    return loaded


def constructor_settings(layer: type, config: Any, up_to: str) -> dict:
    """The fields of dataclass `config` that `layer`'s constructor takes by
    name, its bases' constructors up to the class named `up_to` included.

    A registry builds a layer from its settings this way (`build_sampler`,
    `build_encoder`): a new setting reaches the layers that name it and no
    other. Keras' own `name` is never a setting.
    """
    accepted: set[str] = set()
    for klass in layer.__mro__:
        if "__init__" in vars(klass):
            params = inspect.signature(klass.__init__).parameters.values()
            accepted |= {
                p.name
                for p in params
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            }
        if klass.__name__ == up_to:
            break
    accepted.discard("name")
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name in accepted
    }
