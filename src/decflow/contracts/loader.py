"""Read a contract file: size and encoding limits, safe YAML or JSON, duplicate keys.

Contracts are untrusted data. YAML goes through the safe loader (no tags that build
objects), duplicate keys are errors rather than last-one-wins, YAML aliases may not expand
into an oversized document, nesting is limited to `MAX_DEPTH` levels and integers to what
Python converts. Every problem names its line: parse problems where the parser stopped,
schema problems at the line of the key (or list item) they are about.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decflow.contracts.canonical import contract_hash
from decflow.contracts.contract import Contract
from decflow.contracts.credential_uses import register_values
from decflow.contracts.parse import parse_contract
from decflow.contracts.paths import contract_file
from decflow.contracts.pyyaml import yaml
from decflow.errors import ContractError, DecflowError
from decflow.strictjson import MAX_DEPTH, JsonProblem, key_lines, loads
from decflow.strictjson import problems as json_problems
from decflow.textfile import TextProblem, decode_utf8
from decflow.untrusted import escape, quote, shorten

MAX_BYTES = 1_000_000
MAX_NODES = 1_000_000
# What a contract may amount to once its YAML aliases are expanded (about its JSON size):
# an anchor repeated is fine, an anchor of anchors that multiplies a 100 KB file into
# gigabytes (every later step — validation, the canonical JSON of the hash — works on the
# expanded document) is refused before anything is built.
MAX_EXPANDED_BYTES = 4_000_000
SUFFIXES = (".yaml", ".yml", ".json")
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"


@dataclass(frozen=True, slots=True)
class LoadedContract:
    """A contract as loaded from its file: the contract, its hash, and where it is."""

    contract: Contract
    hash: str
    path: Path
    base_dir: Path

    def resolve(self, relpath: str, field: str = "dataset",
                allowed: Sequence[str] = ()) -> Path:
        """A path written in the contract (dataset, paraphrase file): relative to it and
        inside its folder, or inside an `allowed` one (`decflow.contracts.paths`)."""
        return contract_file(self.base_dir, relpath, field=field, source=str(self.path),
                             allowed=allowed)


# libyaml's parser is about ten times faster; the safe constructor and resolver stay Python.
_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeBase):  # type: ignore[misc]
    """Safe loader that keeps dates as strings: contracts carry no timestamps, and a
    date-like model version must stay text rather than become a non-JSON object."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _YamlChecker:
    """Walks the composed node graph: duplicate keys, nesting depth, integer sizes, the
    expanded size of aliases, and the line of every key and list item (`lines`)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.lines: dict[str, int] = {}
        self._sizes: dict[int, int] = {}
        self._bytes: dict[int, int] = {}
        self._heights: dict[int, int] = {}
        self._open: set[int] = set()

    def size(self, node: yaml.Node, path: str, depth: int = 1) -> int:
        """The node count of `node` expanded; its expanded bytes go to `self._bytes`."""
        key = id(node)
        if key in self._sizes:
            if depth - 1 + self._heights[key] > MAX_DEPTH:  # an alias placed deeper
                raise ValueError(_too_deep(node, path))
            return self._sizes[key]
        if key in self._open:
            raise ValueError(f"{path or 'the document'}: recursive YAML aliases are not allowed")
        self._open.add(key)
        total, height = 1, 0
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            if depth > MAX_DEPTH:
                raise ValueError(_too_deep(node, path))
            if isinstance(node, yaml.MappingNode):
                total += self._mapping(node, path, depth)
            else:
                for i, item in enumerate(node.value):
                    self.lines.setdefault(_join(path, i), item.start_mark.line + 1)
                    total += self.size(item, _join(path, i), depth + 1)
            children = node.value if isinstance(node, yaml.SequenceNode) else [
                value for _, value in node.value
            ]
            height = 1 + max((self._heights[id(child)] for child in children), default=0)
            nodes = node.value if isinstance(node, yaml.SequenceNode) else [
                part for pair in node.value for part in pair
            ]
            # brackets, a separator per item: about the size of the JSON it becomes
            expanded = 2 + sum(self._bytes[id(child)] + 1 for child in nodes)
        else:
            if node.tag == _INT_TAG:
                self._integer(node, path)
            expanded = len(node.value) + 2
        self._open.discard(key)
        self._sizes[key] = total
        self._bytes[key] = expanded
        self._heights[key] = height
        if total > MAX_NODES:
            raise ValueError("the document expands to too many values (check YAML aliases)")
        if expanded > MAX_EXPANDED_BYTES:
            raise ValueError(
                f"{path or 'the document'}: expands to more than {MAX_EXPANDED_BYTES:,} bytes "
                "once its YAML aliases are expanded (the limit for a contract): write the "
                "repeated parts out, or repeat fewer of them"
            )
        return total

    def _mapping(self, node: yaml.MappingNode, path: str, depth: int) -> int:
        first_line: dict[tuple[str, str], int] = {}
        total = 0
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            at = _join(path, key_node.value)
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                ident = (key_node.tag, key_node.value)
                if ident in first_line:
                    self.problems.append(
                        f"line {line}: {at}: duplicate key (first defined on line "
                        f"{first_line[ident]})"
                    )
                else:
                    first_line[ident] = line
                    self.lines.setdefault(at, line)
            total += self.size(key_node, path, depth + 1) + self.size(value_node, at, depth + 1)
        return total

    def _integer(self, node: yaml.Node, path: str) -> None:
        digits = sum(char.isdigit() for char in node.value)
        limit = sys.get_int_max_str_digits()
        if limit and digits > limit:
            self.problems.append(
                f"line {node.start_mark.line + 1}: {path or 'the document'}: an integer of "
                f"{digits:,} digits is too long (at most {limit:,})"
            )


def _too_deep(node: yaml.Node, path: str) -> str:
    return (
        f"line {node.start_mark.line + 1}: {shorten(path, 60) or 'the document'}: nested "
        f"deeper than {MAX_DEPTH} levels"
    )


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _yaml_error(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        # Reader errors carry a character offset, not a mark.
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        character = chr(exc.character) if isinstance(exc.character, int) else exc.character
        return (
            f"invalid YAML: line {line}, column {column}: character {quote(character)} is not "
            "allowed (YAML refuses control characters; write it as an escape in a "
            'double-quoted string, e.g. "\\x1b")'
        )
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"invalid YAML: {where}{problem}{_opened(exc)}"


def _opened(exc: yaml.YAMLError) -> str:
    """Where the construct the parser was in began: an unclosed bracket is found lines
    after it was opened, so the message names both places."""
    context, mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if not context or mark is None:
        return ""
    at = f"line {mark.line + 1}, column {mark.column + 1}"
    if "flow mapping" in context or "flow sequence" in context:
        bracket = "{" if "mapping" in context else "["
        return f"; the '{bracket}' opened at {at} is not closed"
    return f" ({context} started at {at})"


def parse_yaml(text: str, source: str) -> Any:
    return _parse_yaml(text, source)[0]


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The document and the line of every key and list item (by dotted path)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        checker = _YamlChecker()
        try:
            checker.size(node, "")
        except ValueError as exc:
            raise ContractError(source, [str(exc)]) from None
        if checker.problems:
            raise ContractError(source, checker.problems)
        return loader.construct_document(node), checker.lines
    except yaml.YAMLError as exc:
        raise ContractError(source, [_yaml_error(exc, text)]) from None
    except RecursionError:  # the pure-Python composer, when libyaml is missing
        raise ContractError(source, [f"nested deeper than {MAX_DEPTH} levels"]) from None
    finally:
        loader.dispose()


def parse_json(text: str, source: str) -> Any:
    return _parse_json(text, source)[0]


def _parse_json(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The document and the line of every key and list item (by dotted path)."""
    try:
        document = loads(text)
    except JsonProblem:
        raise ContractError(source, [_json_problem(p) for p in json_problems(text)]) from None
    return document, {_dotted(path): line for path, line in key_lines(text).items()}


def _json_problem(problem: JsonProblem) -> str:
    return f"invalid JSON: {problem}"


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in path)


def with_lines(problems: list[str], lines: dict[str, int]) -> list[str]:
    """Prefix each `path: message` problem with the line of its path (or of the nearest
    enclosing path the file has: a missing field is shown at its parent)."""
    shown = []
    for problem in problems:
        path = problem.split(": ", 1)[0].split(" ", 1)[0]
        while path and path not in lines and "." in path:
            path = path.rsplit(".", 1)[0]
        line = lines.get(path) if not problem.startswith("line ") else None
        shown.append(problem if line is None else f"line {line}: {problem}")
    return shown


def read_document(path: Path) -> Any:
    """The parsed document of a contract file, before validation."""
    return _read(path)[0]


def _read(path: Path) -> tuple[Any, dict[str, int]]:
    """The parsed document and the line of every key and list item in it (dotted path)."""
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
        text = decode_utf8(raw)
    except TextProblem as exc:
        raise ContractError(source, [str(exc)]) from None
    return _parse_json(text, source) if suffix == ".json" else _parse_yaml(text, source)


def load_contract(path: str | Path) -> LoadedContract:
    """Read, validate and hash a contract file; raises ContractError (exit 2) on any problem,
    each problem with the line it is about."""
    path = Path(path)
    document, lines = _read(path)
    try:
        contract = parse_contract(document, str(path))
    except ContractError as exc:
        # Problems come escaped (ContractError): look their paths up the same way.
        escaped = {escape(path): line for path, line in lines.items()}
        raise ContractError(exc.source, with_lines(exc.problems, escaped)) from None
    register_values(contract)  # an echo of one of its credentials is redacted everywhere
    return LoadedContract(
        contract=contract,
        hash=contract_hash(contract),
        path=path,
        base_dir=path.parent.resolve(),
    )
