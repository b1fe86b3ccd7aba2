"""Reading contract files: formats, limits, encodings, duplicate keys, YAML aliases."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from decflow.contracts import MAX_BYTES, canonical_dict, load_contract
from decflow.contracts.canonical import section_json
from decflow.contracts.gates import golden_gates_model
from decflow.contracts.properties import properties_model
from decflow.errors import ContractError, DecflowError
from tests.support.contracts import EXAMPLES

SPAM = (EXAMPLES / "spam" / "decguard.yaml").read_text(encoding="utf-8")
MINIMAL = 'schema_version: "0.1"\ndecision: {name: d, type: noul}\nbackend: {provider: mock}\n'


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    assert caught.value.source == str(path)
    return caught.value.problems


@pytest.mark.parametrize("name", ["contract.yaml", "contract.yml", "contract.YAML", "c.json"])
def test_accepted_suffixes(tmp_path: Path, name: str) -> None:
    content = json.dumps(yaml.safe_load(MINIMAL)) if name.endswith(".json") else MINIMAL
    loaded = load_contract(_write(tmp_path, name, content))
    assert loaded.contract.decision.labels == ("yes", "no")


@pytest.mark.parametrize("name", ["contract.toml", "contract.txt", "contract"])
def test_other_suffixes_are_rejected(tmp_path: Path, name: str) -> None:
    problems = _problems(_write(tmp_path, name, MINIMAL))
    assert problems[0].startswith("unsupported file type")
    assert "use .yaml, .yml or .json" in problems[0]


def test_missing_file_is_a_decflow_error(tmp_path: Path) -> None:
    with pytest.raises(DecflowError, match="contract file not found"):
        load_contract(tmp_path / "absent.yaml")


def test_size_limit(tmp_path: Path) -> None:
    padding = MAX_BYTES - len(MINIMAL.encode()) - 2
    at_limit = MINIMAL + "#" + "x" * padding + "\n"
    assert len(at_limit.encode()) == MAX_BYTES == 1_000_000
    load_contract(_write(tmp_path, "ok.yaml", at_limit))
    over = at_limit + "\n"
    assert _problems(_write(tmp_path, "big.yaml", over)) == [
        "the file is larger than 1,000,000 bytes"
    ]


def test_utf8_only(tmp_path: Path) -> None:
    latin1 = MINIMAL.replace("name: d", "name: d, description: caf\xe9").encode("latin-1")
    problems = _problems(_write(tmp_path, "c.yaml", latin1))
    assert problems == [
        "line 2, column 37: byte 0xe9 is not UTF-8 (is the file Latin-1 or Windows-1252?); "
        "save it as UTF-8"
    ]
    utf8 = MINIMAL.replace("name: d", "name: d, description: café")
    assert load_contract(_write(tmp_path, "ok.yaml", utf8)).contract.decision.description == "café"


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, "bom.yaml", b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_contract(path).contract.decision.name == "d"


def test_non_ascii_is_hashed_unescaped(tmp_path: Path) -> None:
    from decflow.contracts import canonical_json

    text = MINIMAL.replace("name: d", "name: d, description: Überprüfung")
    contract = load_contract(_write(tmp_path, "c.yaml", text)).contract
    assert '"description":"Überprüfung"' in canonical_json(contract)


def test_unquoted_schema_version(tmp_path: Path) -> None:
    problems = _problems(_write(tmp_path, "c.yaml", MINIMAL.replace('"0.1"', "0.1")))
    assert problems == [
        'line 1: schema_version: must be the string "0.1", got the number 0.1; quote it in '
        'YAML: schema_version: "0.1"'
    ]


def test_yaml_duplicate_keys_name_path_and_line(tmp_path: Path) -> None:
    text = SPAM.replace("  type: noul\n", "  type: noul\n  name: again\n").replace(
        "  model: spam-mock-v1\n", "  model: spam-mock-v1\n  model: other\n"
    )
    lines = text.splitlines()
    first_name = lines.index("  name: is_spam") + 1
    second_name = lines.index("  name: again") + 1
    problems = _problems(_write(tmp_path, "c.yaml", text))
    assert problems[0] == (
        f"line {second_name}: decision.name: duplicate key (first defined on line {first_name})"
    )
    assert re.fullmatch(r"line \d+: backend.model: duplicate key \(first defined on line \d+\)",
                        problems[1])


def test_yaml_duplicate_keys_inside_lists(tmp_path: Path) -> None:
    text = SPAM.replace(
        '    - contains: "winner"\n', '    - contains: "winner"\n      contains: "loser"\n'
    )
    problems = _problems(_write(tmp_path, "c.yaml", text))
    assert re.match(r"line \d+: backend.rules.0.contains: duplicate key \(", problems[0])


def test_yaml_duplicate_top_level_flow_keys(tmp_path: Path) -> None:
    problems = _problems(_write(tmp_path, "c.yaml", MINIMAL + "backend: {provider: mock}\n"))
    assert problems == ["line 4: backend: duplicate key (first defined on line 3)"]


def test_json_duplicate_keys(tmp_path: Path) -> None:
    text = (
        '{"schema_version": "0.1", "decision": {"name": "d", "type": "noul", "type": "noul"},'
        ' "backend": {"provider": "mock", "rules": [{"contains": "a", "contains": "b"}]}}'
    )
    assert _problems(_write(tmp_path, "c.json", text)) == [
        "invalid JSON: line 1, column 69: decision.type: duplicate key (first defined on line 1)",
        "invalid JSON: line 1, column 146: backend.rules.0.contains: duplicate key (first "
        "defined on line 1)",
    ]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.yaml", "a: [\n", "invalid YAML: line 2, column 1:"),
        ("bad.json", '{"a": 1,}', "invalid JSON: line 1, column 9:"),
        ("nan.json", '{"a": NaN}', "invalid JSON: line 1, column 7: a: NaN is not a JSON number"),
        ("inf.json", '{"a": -Infinity}',
         "invalid JSON: line 1, column 7: a: -Infinity is not a JSON number"),
        ("tag.yaml", "a: !!python/object:os.system x\n", "invalid YAML:"),
        ("empty.yaml", "", "the contract must be a mapping at the top level, got null"),
        ("list.json", "[]", "the contract must be a mapping at the top level, got a list"),
    ],
)
def test_syntax_errors(tmp_path: Path, name: str, text: str, expected: str) -> None:
    problems = _problems(_write(tmp_path, name, text))
    assert problems[0].startswith(expected), problems


def test_yaml_infinity_is_rejected_in_gates(tmp_path: Path) -> None:
    problems = _problems(_write(tmp_path, "c.yaml", MINIMAL + "requirements: {max_nll: .inf}\n"))
    assert problems == ["line 4: requirements.max_nll: must be a finite number, got inf"]


def test_yaml_anchors_expand_like_written_out_values(tmp_path: Path) -> None:
    anchored = (
        MINIMAL.replace("backend: {provider: mock}", "backend: &mock {provider: mock, seed: 3}")
        + "backends: {copy: *mock}\n"
    )
    written = MINIMAL.replace("backend: {provider: mock}", "backend: {provider: mock, seed: 3}")
    written += "backends: {copy: {provider: mock, seed: 3}}\n"
    a = load_contract(_write(tmp_path, "a.yaml", anchored))
    b = load_contract(_write(tmp_path, "b.yaml", written))
    assert a.hash == b.hash
    assert a.contract.backend_config("copy").settings.seed == 3


def test_yaml_alias_bombs_are_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    problems = _problems(_write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n"))
    assert problems == ["the document expands to too many values (check YAML aliases)"]


def test_recursive_yaml_aliases_are_refused(tmp_path: Path) -> None:
    problems = _problems(_write(tmp_path, "loop.yaml", "a: &x [1, *x]\n"))
    assert problems == ["a.1: recursive YAML aliases are not allowed"]


def test_yaml_dates_stay_strings(tmp_path: Path) -> None:
    text = MINIMAL.replace("{provider: mock}", "{provider: mock, model_version: 2026-09-24}")
    loaded = load_contract(_write(tmp_path, "c.yaml", text))
    assert loaded.contract.backend.settings.model_version == "2026-09-24"
    assert loaded.contract.backend.raw["model_version"] == "2026-09-24"


def test_loaded_contract_resolves_paths_next_to_the_contract(tmp_path: Path) -> None:
    loaded = load_contract(EXAMPLES / "refund" / "decguard.yaml")
    assert loaded.path == EXAMPLES / "refund" / "decguard.yaml"
    assert loaded.base_dir == (EXAMPLES / "refund").resolve()
    assert loaded.contract.dataset == "cases.jsonl"
    assert loaded.resolve(loaded.contract.dataset).is_file()
    with pytest.raises(DecflowError, match="is an absolute path"):
        loaded.resolve(str(tmp_path))
    assert loaded.resolve(str(tmp_path), allowed=[str(tmp_path)]) == tmp_path.resolve()
    assert loaded.hash.startswith("sha256:") and len(loaded.hash) == 7 + 64


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "backends: {x: {provider: mock, model_version: !!binary aGk=}}\n",
            "backends.x.model_version: bytes values are not allowed",
        ),
        (
            "backends: {x: {provider: mock, model_version: !!set {a}}}\n",
            "backends.x.model_version: set values are not allowed",
        ),
        (
            "backends: {x: {provider: mock, 1: 2}}\n",
            "backends.x.1: keys must be strings, got the number 1 (quote it)",
        ),
        (
            "backends: {x: {provider: mock, default: {'yes': .nan, 'no': 1}}}\n",
            "backends.x.default.yes: must be a finite number, got nan",
        ),
        ("backends: [x]\n", "backends: expected a mapping, got a list"),
    ],
)
def test_contracts_are_plain_json_data(tmp_path: Path, extra: str, expected: str) -> None:
    problems = _problems(_write(tmp_path, "c.yaml", MINIMAL + extra))
    assert problems == [expected] or expected in problems[0], problems


def test_unquoted_yes_no_get_a_yaml_hint(tmp_path: Path) -> None:
    text = MINIMAL.replace("{provider: mock}", "{provider: mock, default: {yes: 0.5, no: 0.5}}")
    problems = _problems(_write(tmp_path, "c.yaml", text))
    assert problems[0] == (
        "line 3: backend.default.True: keys must be strings, got a boolean (YAML reads "
        "unquoted yes/no/on/off/true/false as booleans; quote it)"
    )
    labels = MINIMAL.replace("type: noul}", "type: noul, labels: [yes, no]}")
    assert _problems(_write(tmp_path, "l.yaml", labels))[0] == (
        "line 2: decision.labels.0: expected a string, got a boolean (YAML reads unquoted "
        "yes/no/on/off/true/false as booleans; quote it)"
    )


def test_loading_a_contract_builds_the_validators_of_what_it_uses_only(tmp_path: Path) -> None:
    # in a fresh process: another test may have validated any model in this one
    path = _write(tmp_path, "c.yaml", MINIMAL)
    script = (
        "import sys\n"
        "from decflow.contracts import load_contract\n"
        "from decflow.contracts.decision import ChoiceDecision, NoulDecision, ScoreDecision\n"
        "from decflow.contracts.providers import HttpSettings, MockSettings\n"
        "from decflow.contracts.sections import Monitor, Policy, Sequential\n"
        "from decflow.contracts.gates import golden_gates_model\n"
        "from decflow.contracts.properties import properties_model\n"
        "loaded = load_contract(sys.argv[1])\n"
        "print(loaded.contract.decision.labels)\n"
        "for model in (NoulDecision, MockSettings, ChoiceDecision, ScoreDecision,\n"
        "              HttpSettings, Monitor, Policy, Sequential, golden_gates_model(),\n"
        "              properties_model()):\n"
        "    print(model.__name__, model.__pydantic_complete__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "('yes', 'no')",
        "NoulDecision True",
        "MockSettings True",
        *(f"{name} False" for name in ("ChoiceDecision", "ScoreDecision", "HttpSettings",
                                         "Monitor", "Policy", "Sequential", "GoldenGates",
                                         "Properties")),
    ]


@pytest.mark.parametrize("model", [golden_gates_model, properties_model])
def test_an_absent_section_is_the_empty_one_and_its_json_is_pydantics(
    model: Callable[[], type[BaseModel]],
) -> None:
    unset, empty = model().model_construct(), model().model_validate({})
    assert unset == empty
    assert section_json(unset) == empty.model_dump(mode="json", by_alias=True)
    assert section_json(empty) == empty.model_dump(mode="json", by_alias=True)
    assert set(section_json(unset).values()) == {None}


def test_absent_and_empty_sections_hash_alike_and_set_ones_differ(tmp_path: Path) -> None:
    absent = load_contract(_write(tmp_path, "a.yaml", MINIMAL))
    empty = load_contract(_write(tmp_path, "e.yaml",
                                 MINIMAL + "requirements: {}\nwarnings: {}\nproperties: {}\n"))
    assert absent.hash == empty.hash
    assert absent.contract == empty.contract
    gate = load_contract(_write(tmp_path, "g.yaml", MINIMAL + "warnings: {max_nll: 2.0}\n"))
    assert gate.hash != absent.hash
    assert canonical_dict(gate.contract)["warnings"]["max_nll"] == 2.0
