"""What several commands share: flags from settings fields, settings from
their flags, and the line about dead letters."""

from __future__ import annotations

import argparse
import dataclasses


def add_field_flags(parser: argparse.ArgumentParser, defaults, flags: dict) -> None:
    """One flag per field of the settings `defaults` named in `flags`
    (`--field-name`), its type and default the field's, `flags[name]` its help."""
    for name, help_line in flags.items():
        default = getattr(defaults, name)
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(default), default=default, help=help_line)


def from_args(cls, args: argparse.Namespace, names=None):
    """A settings dataclass from the flags of its fields (`names`; default:
    every field)."""
    names = names or [f.name for f in dataclasses.fields(cls)]
    return cls(**{name: getattr(args, name) for name in names})


def say_dead_letters(count: int, directory: str) -> None:
    """The line a command prints when it set malformed lines aside."""
    if count:
        print(f"{count:,} malformed lines set aside in {directory}/")
