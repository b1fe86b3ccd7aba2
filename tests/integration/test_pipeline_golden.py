"""Golden runs end to end (CLI and runner) against DecGuard 0.1.1's own outputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.compare import close
from tests.support.paths import FIXTURES, REFERENCE

EXAMPLES = REFERENCE / "decguard-examples"
VECTORS = REFERENCE / "decguard-vectors"

def golden_run(tmp_path: Path, example: str, *extra: str) -> dict[str, object]:
    contract = EXAMPLES / example / "decguard.yaml"
    out = tmp_path / "report.json"
    code, _, _ = run_cli(
        "test", str(contract), "--store", str(tmp_path / "store"), "-o", str(out), *extra
    )
    report = json.loads(out.read_text())
    assert code == report["exit_code"]
    return report


@pytest.mark.parametrize(
    ("example", "vector", "args"),
    [
        ("refund", "golden-refund-test-default.json", ()),
        ("refund", "golden-refund-test-order_sensitive.json", ("-b", "order_sensitive")),
        ("severity", "golden-severity-all.json", ()),
        ("spam", "golden-spam-all.json", ()),
    ],
)
def test_golden_run_equals_reference(tmp_path: Path, example: str, vector: str, args: tuple):
    expected = json.loads((VECTORS / vector).read_text())
    report = golden_run(tmp_path, example, *args)
    assert report["dataset"]["hash"] == expected["dataset"]["hash"]
    assert report["dataset"]["n_cases"] == expected["dataset"]["n_cases"]
    got = {r["case_id"]: r for r in report["results"]}
    for ref in expected["results"]:
        mine = got[ref["case_id"]]
        assert mine["expected"] == ref["expected"]
        assert close(mine["result"]["probabilities"], ref["probabilities"])
        assert mine["result"]["selected"] == ref["selected"]
    metrics = {k: v for k, v in report["metrics"].items() if k != "latency"}
    ref_metrics = {k: v for k, v in expected["metrics"].items() if k != "latency"}
    assert close(metrics, ref_metrics)
    non_latency = [c for c in report["checks"] if c["metric"] != "latency_p95_ms"]
    ref_checks = [
        c for c in expected["checks"]
        if c["metric"] != "latency_p95_ms" and "." not in c["gate"]
    ]
    assert non_latency == ref_checks
    assert [c["gate"] for c in report["checks"]] == [
        c["gate"] for c in expected["checks"] if "." not in c["gate"]
    ]
    assert report["failures"] == expected["failures"]
    assert (report["status"], report["exit_code"]) == (expected["status"], expected["exit_code"])


def test_text_view_shape(tmp_path: Path):
    code, out, _ = run_cli(
        "test", str(EXAMPLES / "refund" / "decguard.yaml"), "--store", str(tmp_path)
    )
    assert code == 0
    assert "refund_request (choice) · PASS" in out
    assert "Cases        11 total · 11 decided · 0 errored · 10 labeled" in out
    assert "Selective    confidence >= 0.8: coverage 0.7273   abstention 0.2727" in out
    assert "PASS  min_accuracy" in out and "(warning)" in out
    assert out.rstrip().endswith("PASS: all gates hold")


def write_edited(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "edited"
    shutil.copytree(EXAMPLES / "refund", folder)
    path = folder / "decguard.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_regate_uses_no_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    store = str(tmp_path / "store")
    code, _, _ = run_cli("test", str(EXAMPLES / "refund" / "decguard.yaml"), "--store", store)
    assert code == 0
    run_id = os.listdir(Path(store) / "runs")[0]

    def edit(data: dict) -> None:
        data["warnings"]["min_coverage"] = 0.9
        # the backend is now unreachable: a re-gate must not call it
        data["backend"] = {"provider": "http", "url": "http://127.0.0.1:9/decide"}

    edited = write_edited(tmp_path, edit)

    def no_backend(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("re-gating must not build or call a backend")

    # the modules first (each imported here if the run has not, with the real registry): a
    # module imported while the registry is patched would keep the fake after the test
    monkeypatch.setattr("decflow.pipeline.contract_run.results.build_backend", no_backend)
    monkeypatch.setattr("decflow.pipeline.direct_calls.build_backend", no_backend)
    monkeypatch.setattr("decflow.backends.registry.build_backend", no_backend)
    out = tmp_path / "regated.json"
    code, text, _ = run_cli("report", run_id, "-c", str(edited), "--store", store, "-o", str(out))
    regated = json.loads(out.read_text())
    assert code == 0
    assert regated["status"] == "warn"
    warning = [
        c for c in regated["checks"] if c["level"] == "warning" and c["gate"] == "min_coverage"
    ]
    assert warning and warning[0]["status"] == "warn"
    assert "WARN: no requirement fails" in text
    # the stored run is unchanged
    stored = json.loads((Path(store) / "runs" / run_id / "report.json").read_text())
    assert stored["status"] == "pass"


def test_regate_standalone_report_file(tmp_path: Path):
    report = golden_run(tmp_path, "refund")
    path = tmp_path / "copy.json"
    report["run"]["id"] = "elsewhere"
    path.write_text(json.dumps(report))
    edited = write_edited(tmp_path, lambda d: d["requirements"].update(min_accuracy=1.01 - 0.02))
    code, _, _ = run_cli("report", str(path), "-c", str(edited), "--store", str(tmp_path / "x"))
    assert code == 0


def test_tampered_report_is_exit_2(tmp_path: Path):
    report = golden_run(tmp_path, "refund")
    report["results"][0]["result"]["probabilities"]["refund"] = 0.5
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(report))
    code, _, err = run_cli("report", str(path), "--store", str(tmp_path / "x"))
    assert code == 2
    assert "results.0.result" in err and "Traceback" not in err


def test_unknown_backend_and_usage_errors(tmp_path: Path):
    contract = str(EXAMPLES / "refund" / "decguard.yaml")
    code, _, err = run_cli("test", contract, "-b", "nope", "--store", str(tmp_path))
    assert code == 2 and "nope" in err
    code, _, _ = run_cli("test", contract, "--seed", "3", "--store", str(tmp_path))
    assert code == 2  # --seed applies only with --all
    code, _, _ = run_cli("test", contract, "-f", "xml", "--store", str(tmp_path))
    assert code == 2


def test_bad_dataset_names_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "ok", "expected": "refund"}\n{"input": "x", "expected": "nope"}\n')
    code, _, err = run_cli(
        "test", str(EXAMPLES / "refund" / "decguard.yaml"), "-d", str(bad),
        "--store", str(tmp_path),
    )
    assert code == 2
    assert f"{bad}: line 2: unknown label 'nope'" in err


def run_process(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "decflow", *args], capture_output=True, text=True, cwd=cwd,
        check=False,
    )


def test_process_errors_have_no_traceback(tmp_path: Path):
    contract = tmp_path / "c.yaml"
    contract.write_text('schema_version: "0.1"\ndecision: {name: x, type: noul}\n'
                        "backend: {provider: mock}\nrequirements: {min_acuracy: 0.9}\n")
    done = run_process("validate", str(contract))
    assert done.returncode == 2
    assert "requirements.min_acuracy: unknown field (check the spelling)" in done.stderr
    assert "Traceback" not in done.stderr
    bare = run_process()  # no command: the help, and exit 2 (a usage error)
    assert bare.returncode == 2
    assert bare.stdout.startswith("Usage: ") and "Commands:" in bare.stdout


def test_cli_import_does_not_import_prefect():
    code = "import sys, decflow.cli; decflow.cli._register(); print('prefect' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_version():
    done = run_process("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("decflow ")


def test_resume_skips_recorded_results(tmp_path: Path):
    """A finished run resumed again records no new results (the call stage is complete)."""
    store = str(tmp_path / "store")
    contract = str(EXAMPLES / "refund" / "decguard.yaml")
    code, _, _ = run_cli("test", contract, "--store", store)
    run_id = os.listdir(Path(store) / "runs")[0]
    before = sorted(p.name for p in (Path(store) / "stages" / "results").rglob("*.parquet"))
    code, _, _ = run_cli("test", contract, "--store", store, "--resume", run_id)
    after = sorted(p.name for p in (Path(store) / "stages" / "results").rglob("*.parquet"))
    assert code == 0 and before == after


def test_from_stage_report_recomputes_the_summary(tmp_path: Path):
    """`--from-stage report` means `summary` (there is no report stage); an unknown stage
    is refused with the stages a run has."""
    store = str(tmp_path / "store")
    contract = str(EXAMPLES / "refund" / "decguard.yaml")
    code, _, _ = run_cli("test", contract, "--store", store, "-o", str(tmp_path / "a.json"))
    run_id = os.listdir(Path(store) / "runs")[0]
    again = tmp_path / "b.json"
    resumed, _, _ = run_cli("test", contract, "--store", store, "--resume", run_id,
                            "--from-stage", "report", "-o", str(again))
    first = json.loads((tmp_path / "a.json").read_text())
    assert resumed == code and json.loads(again.read_text())["checks"] == first["checks"]
    runs_before = sorted(os.listdir(Path(store) / "runs"))
    code, _, err = run_cli("test", contract, "--store", store, "--resume", run_id,
                           "--from-stage", "reports")
    assert code == 2
    # refused before any run is set up: no "this is a new run …" note, no new run
    assert err == ("error: --from-stage: unknown stage 'reports' (stages: cases, requests, "
                   "results, comparisons, minimized, summary)\n")
    assert sorted(os.listdir(Path(store) / "runs")) == runs_before


DECGUARD_REPORTS = FIXTURES / "diff"


def test_decguard_reports_are_verified_shown_and_regated(tmp_path: Path):
    source = DECGUARD_REPORTS / "refund-strong_model.json"
    code, out, _ = run_cli("report", str(source), "--store", str(tmp_path))
    assert code == 1 and "FAIL" in out.splitlines()[0]  # DecGuard's own verdict, exit 1
    edited = write_edited(tmp_path, lambda d: d["requirements"].update(min_accuracy=0.1))
    regated = tmp_path / "regated.json"
    code, _, _ = run_cli("report", str(source), "-c", str(edited), "--store", str(tmp_path),
                         "-o", str(regated))
    document = json.loads(regated.read_text())
    accuracy = next(c for c in document["checks"] if c["gate"] == "min_accuracy")
    assert accuracy["status"] == "pass" and accuracy["threshold"] == 0.1
    report = json.loads(source.read_text())
    report["metrics"]["classification"]["accuracy"] = 0.99
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(report))
    code, _, err = run_cli("report", str(tampered), "--store", str(tmp_path))
    assert code == 2 and "metrics" in err


def test_an_underpowered_decguard_pass_says_so_in_its_headline_only(tmp_path: Path):
    """DecGuard parity stands (checks and exit code as DecGuard's), but a PASS whose
    evidence cannot show the gate holds is marked in the headline: 3 of 3 right is an
    exact one-sided 95 % lower bound of 0.05^(1/3) = 0.3684 against min_accuracy 0.9."""
    expected = json.loads((VECTORS / "golden-spam-all.json").read_text())
    full = golden_run(tmp_path / "full", "spam", "--all")
    assert [c for c in full["checks"] if "." not in c["gate"]] == [
        c for c in expected["checks"] if "." not in c["gate"]]
    assert (full["status"], full["exit_code"]) == (expected["status"], expected["exit_code"])
    right, n = 9, 10  # DecGuard's accuracy on the example: 0.9 of 10 cases
    assert expected["metrics"]["classification"]["accuracy"] == right / n

    def at_least_right(p: float) -> float:  # P(X >= 9 | n 10, p)
        return 10 * p**9 * (1 - p) + p**10

    low, high = 0.0, 1.0  # the exact lower bound: P(X >= 9) = 0.05
    for _ in range(60):
        low, high = (low, (low + high) / 2) if at_least_right((low + high) / 2) > 0.05 \
            else ((low + high) / 2, high)
    assert full["headline"] == (f"PASS (underpowered: min_accuracy lower bound {low:.4g}): "
                                "9/9 gates hold")

    folder = tmp_path / "three"
    shutil.copytree(EXAMPLES / "spam", folder)
    cases = json.loads((folder / "cases.json").read_text())
    (folder / "cases.json").write_text(json.dumps(cases[:3]))
    out = tmp_path / "three.json"
    code, text, _ = run_cli("test", "--all", str(folder / "decguard.yaml"), "--store",
                            str(tmp_path / "store"), "-o", str(out))
    report = json.loads(out.read_text())
    bound = f"{0.05 ** (1 / 3):.4g}"
    assert bound == "0.3684"
    line = (f"PASS (underpowered: min_accuracy lower bound {bound}): "
            f"{len(report['checks'])}/{len(report['checks'])} gates hold")
    assert code == report["exit_code"] == 0 and report["status"] == "pass"
    assert report["headline"] == text.splitlines()[0] == line
    assert report["qualifiers"] == [{"name": "underpowered",
                                     "detail": f"min_accuracy lower bound {bound}"}]
    assert not any("evidence" in c for c in report["checks"])  # DecGuard's keys only
    assert "PASS: all gates hold" in text  # DecGuard's verdict line, unchanged
