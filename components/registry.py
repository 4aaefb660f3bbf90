"""A registry of named kinds, shared by the samplers' and the encoders'
(`genni.components.samplers.registry`, `genni.models.encoders.registry`).

A kind says what a name means; its `layer` is "module:Class", imported only
when a layer is built, so that names and settings need no TensorFlow.
"""

from __future__ import annotations

import importlib


class Registry:
    """Names of one thing (`what`: "sampler", "encoder"), each with its kind,
    in registration order."""

    def __init__(self, what: str):
        self.what = what
        self._kinds: dict = {}

    def register(self, name: str, kind) -> None:
        """Add `kind` under `name` (an existing name is an error)."""
        if name in self._kinds:
            article = "An" if self.what[0] in "aeiou" else "A"
            raise ValueError(
                f"{article} {self.what} named {name!r} is already registered."
            )
        self._kinds[name] = kind

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._kinds)

    def get(self, name: str):
        """The kind registered as `name`; a clear error for any other name."""
        try:
            return self._kinds[name]
        except KeyError:
            raise ValueError(
                f"Unknown {self.what} {name!r}; expected one of {self.names()}."
            ) from None

    def having(self, flag: str) -> tuple[str, ...]:
        """The names whose kind's `flag` attribute is true."""
        return tuple(n for n, kind in self._kinds.items() if getattr(kind, flag))

    def layer_class(self, name: str) -> type:
        """The layer class registered as `name` (imports its module)."""
        module, _, cls = self.get(name).layer.partition(":")
        return getattr(importlib.import_module(module), cls)
