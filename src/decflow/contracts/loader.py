"""Read a contract file: size and encoding limits, safe YAML or JSON, duplicate keys.

Contracts are untrusted data. YAML goes through the safe loader (no tags that build
objects), duplicate keys are errors rather than last-one-wins, and YAML aliases may not
expand into an oversized document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from decflow.contracts.canonical import contract_hash
from decflow.contracts.contract import Contract
from decflow.contracts.parse import parse_contract
from decflow.errors import ContractError, DecflowError

MAX_BYTES = 1_000_000
MAX_NODES = 1_000_000
SUFFIXES = (".yaml", ".yml", ".json")
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class LoadedContract:
    contract: Contract
    hash: str
    path: Path
    base_dir: Path

    def resolve(self, relpath: str | Path) -> Path:
        """A path written in the contract (dataset, paraphrase file) is relative to it."""
        return self.base_dir / relpath


# libyaml's parser is about ten times faster; the safe constructor and resolver stay Python.
_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeBase):  # type: ignore[valid-type,misc]
    """Safe loader that keeps dates as strings: contracts carry no timestamps, and a
    date-like model version must stay text rather than become a non-JSON object."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _YamlChecker:
    """Walks the composed node graph: duplicate keys, and the expanded size of aliases."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._sizes: dict[int, int] = {}
        self._open: set[int] = set()

    def size(self, node: yaml.Node, path: str) -> int:
        key = id(node)
        if key in self._sizes:
            return self._sizes[key]
        if key in self._open:
            raise ValueError(f"{path or 'the document'}: recursive YAML aliases are not allowed")
        self._open.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(self.size(item, _join(path, i)) for i, item in enumerate(node.value))
        self._open.discard(key)
        self._sizes[key] = total
        if total > MAX_NODES:
            raise ValueError("the document expands to too many values (check YAML aliases)")
        return total

    def _mapping(self, node: yaml.MappingNode, path: str) -> int:
        first_line: dict[tuple[str, str], int] = {}
        total = 0
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                ident = (key_node.tag, key_node.value)
                if ident in first_line:
                    self.problems.append(
                        f"{_join(path, key_node.value)}: duplicate key (line {line}; first "
                        f"defined on line {first_line[ident]})"
                    )
                else:
                    first_line[ident] = line
            total += self.size(key_node, path) + self.size(value_node, _join(path, key_node.value))
        return total


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"invalid YAML: {where}{problem}"


def parse_yaml(text: str, source: str) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        checker = _YamlChecker()
        try:
            checker.size(node, "")
        except ValueError as exc:
            raise ContractError(source, [str(exc)]) from None
        if checker.problems:
            raise ContractError(source, checker.problems)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ContractError(source, [_yaml_error(exc)]) from None
    finally:
        loader.dispose()


class _JsonObject(dict[str, Any]):
    duplicates: list[str]


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _json_duplicates(value: Any, path: str) -> list[str]:
    problems = []
    if isinstance(value, _JsonObject):
        problems += [f"{_join(path, key)}: duplicate key" for key in value.duplicates]
        for key, item in value.items():
            problems += _json_duplicates(item, _join(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems += _json_duplicates(item, _join(path, i))
    return problems


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str, source: str) -> Any:
    try:
        data = json.loads(text, object_pairs_hook=_json_object, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ContractError(
            source, [f"invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"]
        ) from None
    except ValueError as exc:
        raise ContractError(source, [f"invalid JSON: {exc}"]) from None
    problems = _json_duplicates(data, "")
    if problems:
        raise ContractError(source, problems)
    return _plain(data)


def read_document(path: Path) -> Any:
    """The parsed document of a contract file, before validation."""
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ContractError(
            source, [f"unsupported file type {path.suffix or '(none)'!r}; use .yaml, .yml or .json"]
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise DecflowError(f"{source}: contract file not found") from None
    except OSError as exc:
        raise DecflowError(f"{source}: cannot read the contract: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise ContractError(source, [f"the file is larger than {MAX_BYTES:,} bytes"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(
            source, [f"the file is not valid UTF-8 (byte {exc.start}); save it as UTF-8"]
        ) from None
    text = text.removeprefix("\ufeff")
    return parse_json(text, source) if suffix == ".json" else parse_yaml(text, source)


def load_contract(path: str | Path) -> LoadedContract:
    """Read, validate and hash a contract file; raises ContractError (exit 2) on any problem."""
    path = Path(path)
    contract = parse_contract(read_document(path), str(path))
    return LoadedContract(
        contract=contract,
        hash=contract_hash(contract),
        path=path,
        base_dir=path.parent.resolve(),
    )
