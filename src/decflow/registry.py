"""The registry of one extension family (properties, backend providers, view formats).

Entries are kept by name in registration order. A registry closes the first time it is
read (a contract parsed, a backend built, the command line's options made): registering
afterwards is an error, so what a contract means and how it hashes never depends on what
was imported after it was loaded. Built-in entries are registered where the family is
defined; an extension registers through the same `register` before anything reads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from decflow.errors import DecflowError

T = TypeVar("T")


class Registry(Generic[T]):
    """`family` names the entries in messages (`property`, `backend provider`, ...)."""

    def __init__(self, family: str, name_of: Callable[[T], str]) -> None:
        self.family = family
        self._name_of = name_of
        self._entries: dict[str, T] = {}
        self._closed = False

    def register(self, entry: T) -> T:
        name = self._name_of(entry)
        if self._closed:
            raise DecflowError(
                f"{self.family} '{name}': registered after the {self.family} registry was "
                "read; register it before the first contract is loaded"
            )
        if name in self._entries:
            raise DecflowError(f"{self.family} '{name}' is registered twice")
        self._entries[name] = entry
        return entry

    def entries(self) -> tuple[T, ...]:
        """Every entry, in registration order (closes the registry)."""
        self._closed = True
        return tuple(self._entries.values())

    def names(self) -> tuple[str, ...]:
        self._closed = True
        return tuple(self._entries)

    def get(self, name: str) -> T:
        """The entry called `name`; exit 2 naming the registered ones when there is none."""
        self._closed = True
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or "none"
            raise DecflowError(f"unknown {self.family} '{name}' (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        self._closed = True
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return iter(self.entries())


def imported(ref: str) -> Any:
    """The attribute `ref` names (`module:attribute`), imported when first asked for: an
    entry names its implementation so the registry itself imports nothing above it."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
