"""Files a contract names stay in its folder (issue 21, class 4): a dataset that is a
symlink to a credentials file, an absolute path or a `../` escape is refused with exit 2
before it is read, and nothing of the file reaches the output; `--allow-path DIR` (or
`DECFLOW_ALLOW_PATH`) widens the folder, `-d` on the command line is the user's own; an
error about a file that is no dataset quotes at most a short excerpt, never a whole line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES

SECRET = "ghp_decflowPathTest0123456789abcdef"
CREDENTIALS = f"https://ci-bot:{SECRET}@github.com\n"


def project(tmp_path: Path, dataset: str, **properties: object) -> Path:
    """A contract folder (`repo/`) beside a folder holding a credentials file (`home/`)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".git-credentials").write_text(CREDENTIALS)
    (home / "cases.jsonl").write_bytes((EXAMPLES / "refund" / "cases.jsonl").read_bytes())
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    contract = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    contract["dataset"] = dataset
    if properties:
        contract["properties"] = properties
    path = repo / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract))
    return path


def refused(tmp_path: Path, contract: Path, *extra: str) -> str:
    """Both commands that read the dataset refuse it; what they printed."""
    printed = ""
    for command in (["validate", str(contract)],
                    ["test", str(contract), "--store", str(tmp_path / "store")]):
        code, out, err = run_cli(*command, *extra)
        assert code == 2, (command, out, err)
        assert "a contract names files inside its own folder" in err, err
        printed += out + err
    assert SECRET not in printed and "ci-bot" not in printed
    return printed


def test_a_symlink_out_of_the_contracts_folder_is_refused(tmp_path: Path) -> None:
    contract = project(tmp_path, "cases.csv")
    (contract.parent / "cases.csv").symlink_to(tmp_path / "home" / ".git-credentials")
    assert "'cases.csv' leads outside the contract's folder" in refused(tmp_path, contract)


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_an_absolute_path_or_a_dotdot_escape_is_refused(tmp_path: Path, how: str) -> None:
    target = tmp_path / "home" / ".git-credentials"
    contract = project(tmp_path, str(target) if how == "absolute" else "../home/cases.jsonl")
    printed = refused(tmp_path, contract)
    assert ("is an absolute path" if how == "absolute" else "leads outside") in printed


def test_a_paraphrase_file_out_of_the_contracts_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "para.jsonl").write_text(
        json.dumps({"input": "x", "paraphrases": [CREDENTIALS]}) + "\n")
    contract = project(tmp_path, "cases.jsonl", paraphrase={
        "source": {"provider": "file", "path": "../home/para.jsonl"}, "max_tv_distance": 0.1})
    (contract.parent / "cases.jsonl").write_bytes(
        (EXAMPLES / "refund" / "cases.jsonl").read_bytes())
    code, out, err = run_cli("fuzz", str(contract), "--store", str(tmp_path / "store"))
    assert code == 2 and "properties.paraphrase.source.path" in err, out + err
    assert SECRET not in out + err


def test_allowed_folders_and_the_command_line_widen_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    contract = project(tmp_path, str(home / "cases.jsonl"))
    code, out, err = run_cli("validate", str(contract), "--allow-path", str(home))
    assert code == 0 and "11 cases" in out, err
    store = str(tmp_path / "store")
    code, _out, err = run_cli("test", str(contract), "--store", store, "--allow-path", str(home))
    assert code in (0, 1), err
    monkeypatch.setenv("DECFLOW_ALLOW_PATH", os.pathsep.join(["/nonexistent", str(home)]))
    assert run_cli("validate", str(contract))[0] == 0
    monkeypatch.delenv("DECFLOW_ALLOW_PATH")
    code, _out, err = run_cli("test", str(contract), "--store", store,
                              "-d", str(home / "cases.jsonl"))
    assert code in (0, 1), err


def test_a_file_that_is_no_dataset_is_quoted_by_a_short_excerpt_at_most(
    tmp_path: Path,
) -> None:
    contract = project(tmp_path, "cases.csv")
    folder = contract.parent
    lines = {
        "one column": CREDENTIALS,
        "two columns": f"input,{CREDENTIALS}",
        "repeated": f"{CREDENTIALS.strip()},{CREDENTIALS.strip()}\n",
    }
    for name, text in lines.items():
        (folder / "cases.csv").write_text(text + "a,b\n")
        code, out, err = run_cli("validate", str(contract))
        assert code == 2, (name, out, err)
        assert SECRET not in err and "ci-bot" not in err, (name, err)
