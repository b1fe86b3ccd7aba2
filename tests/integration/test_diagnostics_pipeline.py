"""Diagnostics in contract runs, end to end through the CLI: rerun stability, blindness and
counterfactual persona flips, their gates, the text view and re-gating without calls.

External oracles: exact bounds (0 of 11 cases → 1 − 0.05^(1/11) = 0.238), the default
persona preamble from the product spec, DecGuard's example contracts and their checks. The
case is the sampling unit of every verdict (issue 23), so a meter on 11 cases cannot be
deterministic at 5 % however many reruns it makes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, FIXTURES, ROOT, VECTORS
from tests.support.servers.recording import Recorded, RecordingServer, Reply

LOAN = ROOT / "contracts" / "loan" / "decflow.yaml"
DEFAULT_PREAMBLE = "Applicant: {full_name}, {occupation}. {religion_clause}"


def run(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    code, text, err = run_cli(*args, "--store", str(tmp_path / "store"), "-o", str(out))
    assert out.exists(), err
    report = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return code, report, text


def write_contract(tmp_path: Path, data: dict[str, Any], name: str = "decflow.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def loan(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """The loan example, its dataset copied beside the contract to be, plus top-level
    changes."""
    data = yaml.safe_load(LOAN.read_text())
    shutil.copy(LOAN.parent / data["dataset"], tmp_path / data["dataset"])
    data.update(changes)
    return data


def refund_with(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    shutil.copy(EXAMPLES / "refund" / data["dataset"], tmp_path / data["dataset"])
    data.update(changes)
    return write_contract(tmp_path, data, "refund.yaml")


def checks_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["gate"]: c for c in report["checks"]}


def axes_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["axis"]: a for a in report["diagnostics"]["counterfactual"]["axes"]}


# -- stability meter -----------------------------------------------------------------------


def test_deterministic_mock_on_few_cases_is_not_established(tmp_path: Path) -> None:
    # 11 refund cases × 6 draws = 33 quiet pairs, but 11 sampling units: not established.
    few = refund_with(tmp_path, diagnostics={"stability": {"repeats": 6, "epsilon": 0.05}})
    code, report, text = run(tmp_path, "stability", str(few))
    meter = report["diagnostics"]["stability"]
    assert (meter["pairs"], meter["flips"], meter["verdict"]) == (33, 0, "undecided")
    assert meter["measured_cases"] == 11 and meter["ci_high"] > 0.05
    check = checks_of(report)["stability.verdict"]
    assert code == 0 and check["status"] == "not_established"
    assert check["evidence"]["n"] == 11 and check["evidence"]["verdict"] == "not_established"
    needed = meter["cases_needed"]
    assert f"About {needed} cases" in report["diagnostics"]["guidance"]
    assert text.index("Oracle") < text.index("Checks")

    # 14 draws give 77 pairs, but still 11 cases: more reruns of the same cases do not
    # make the rerun noise of other cases known (they were "deterministic" when pairs were
    # counted as independent).
    many = refund_with(tmp_path, diagnostics={"stability": {"repeats": 14, "epsilon": 0.05}})
    _, report, _ = run(tmp_path, "stability", str(many))
    meter = report["diagnostics"]["stability"]
    assert (meter["pairs"], meter["verdict"]) == (77, "undecided")
    assert meter["mean_tv"] == 0.0
    assert meter["sources"] == {"reruns": 11 * 13, "identity_paraphrase": 0}


def test_reruns_reuse_the_original_and_are_requests(tmp_path: Path) -> None:
    contract = refund_with(tmp_path, diagnostics={"stability": {"repeats": 4}})
    _, report, _ = run(tmp_path, "stability", str(contract))
    stage = tmp_path / "store" / report["run"]["artifacts"]["requests"]["path"]
    requests = pl.read_parquet(stage / "part-*.parquet")
    reruns = requests.filter(pl.col("property") == "stability")
    # n·(k − 1) extra calls: the original is each series' first draw.
    assert reruns.height == 11 * 3
    assert set(reruns["sample"].to_list()) == {1, 2, 3}
    first = reruns.row(0, named=True)
    assert first["request_id"] == f"stability/{first['case_id']}/{first['sample']}"
    original = requests.filter(
        (pl.col("property") == "") & (pl.col("case_id") == first["case_id"])
    ).row(0, named=True)
    assert first["input_text"] == original["input_text"]
    assert first["shown_labels"] == original["shown_labels"]


class CoinFlipServer(RecordingServer):
    """Answers each request with a distribution peaked on a label drawn by a seeded hash."""

    def __init__(self) -> None:
        self.counter = itertools.count()
        super().__init__(self.answer)

    def answer(self, request: Recorded) -> Reply:
        labels = request.json()["decision"]["labels"]
        draw = hashlib.sha256(f"seed-7/{next(self.counter)}".encode()).digest()[0]
        chosen = labels[draw % len(labels)]
        rest = 0.2 / (len(labels) - 1)
        return Reply(body={"probabilities": {
            label: 0.8 if label == chosen else rest for label in labels
        }})


def http_refund(tmp_path: Path, url: str, level: str) -> Path:
    return refund_with(
        tmp_path,
        backend={"provider": "http", "url": url, "model": "coin-flip"},
        backends={},
        policy=None,
        diagnostics={"stability": {"repeats": 4, "epsilon": 0.05, "level": level}},
    )


def test_sampling_backend_is_stochastic_and_regates_without_calls(tmp_path: Path) -> None:
    with CoinFlipServer() as server:
        contract = http_refund(tmp_path, server.url("/decide"), "requirement")
        code, report, text = run(tmp_path, "stability", str(contract), "--no-healthcheck")
        sent = len(server.requests)
    meter = report["diagnostics"]["stability"]
    assert sent == 11 * 4
    assert meter["verdict"] == "stochastic" and meter["ci_low"] > 0.05
    assert meter["mean_tv"] > 0
    assert checks_of(report)["stability.verdict"]["status"] == "fail" and code == 1
    assert report["diagnostics"]["guidance"].startswith("STOCHASTIC")
    assert "not against zero" in text

    # The server is gone: re-gating recomputes the meter from stored results only.
    relaxed = http_refund(tmp_path, "http://127.0.0.1:9/decide", "warning")
    code, regated, _ = run(tmp_path, "report", report["run"]["id"], "-c", str(relaxed))
    assert regated["diagnostics"]["stability"] == meter
    assert checks_of(regated)["stability.verdict"]["status"] == "warn" and code == 0


def test_identity_paraphrase_is_rerun_evidence_not_a_paraphrase_test(tmp_path: Path) -> None:
    contract = EXAMPLES / "refund" / "decguard.yaml"
    _, report, text = run(tmp_path, "fuzz", str(contract))
    reference = json.loads((VECTORS / "summaries-refund-default-seed42.json").read_text())
    assert report["checks"] == reference["checks"]  # DecGuard's counts and checks unchanged
    meter = report["diagnostics"]["stability"]
    # One re-ask per case against its original: 0 of 11 bounds the rate only below
    # 1 − 0.05^(1/11) = 0.238 (exact: one pair per case).
    assert meter["sources"] == {"reruns": 0, "identity_paraphrase": 11}
    assert (meter["pairs"], meter["verdict"], meter["configured"]) == (11, "undecided", False)
    assert math.isclose(meter["ci_high"], 1 - 0.05 ** (1 / 11), rel_tol=1e-9)
    named = {item["name"] for item in report["diagnostics"]["not_exercised"]}
    assert named == {"paraphrase"}
    assert "NOT EXERCISED" in text.split("PASS: all gates hold")[1]


# -- blindness ---------------------------------------------------------------------------


def constant_loan(tmp_path: Path, **diagnostics: Any) -> Path:
    data = loan(tmp_path, backend={
        "provider": "mock", "model": "always-approve",
        "default": {"approve": 0.9, "review": 0.07, "deny": 0.03},
    }, backends={}, requirements={}, diagnostics=diagnostics or None)
    if not diagnostics:
        del data["diagnostics"]
    return write_contract(tmp_path, data)


def test_constant_backend_is_blind_and_its_persona_score_is_not_a_pass(tmp_path: Path) -> None:
    contract = constant_loan(tmp_path, blindness={"threshold": 0.9, "level": "requirement"})
    code, report, text = run(tmp_path, "test", "--all", str(contract))
    blindness = report["diagnostics"]["blindness"]
    assert (blindness["blind"], blindness["skew"], blindness["modal_label"]) == (
        True, 1.0, "approve"
    )
    checks = checks_of(report)
    assert checks["blindness.max_skew"]["status"] == "fail" and code == 1
    counterfactual = report["diagnostics"]["counterfactual"]
    assert counterfactual["blind"] is True
    for axis in counterfactual["axes"]:
        assert axis["flips"] == 0
        assert axis["verdict"] != "fair-qualified"
        gate = checks[f"counterfactual.{axis['axis']}.max_flip_rate"]
        assert gate["status"] == "not_established" and "base decisions blind" in gate["message"]
    assert "potentially vacuous" in checks["case_swap.max_flip_rate"]["message"]
    assert "fair-qualified" not in text
    verdict_area = text.split("FAIL: at least one requirement does not hold")[1]
    assert "BLIND" in verdict_area and "potentially vacuous" in verdict_area


def test_blindness_without_a_section_only_informs(tmp_path: Path) -> None:
    contract = constant_loan(tmp_path)
    code, report, _ = run(tmp_path, "test", "--all", str(contract))
    assert report["diagnostics"]["blindness"]["blind"] is True
    assert "blindness.max_skew" not in checks_of(report)
    assert not any(c["gate"].startswith("stability.") for c in report["checks"])
    assert report["diagnostics"]["stability"] is None  # no section: no reruns
    assert code == 0


def test_plain_golden_run_has_no_diagnostics(tmp_path: Path) -> None:
    _, report, _ = run(tmp_path, "test", str(LOAN))
    assert report["diagnostics"] is None
    assert set(checks_of(report)) == {"min_accuracy", "min_coverage", "max_error_rate"}


# -- counterfactual persona flips -----------------------------------------------------------


def test_planted_religion_bias_is_found_on_that_axis_only(tmp_path: Path) -> None:
    code, report, text = run(tmp_path, "test", "--all", str(LOAN))
    counterfactual = report["diagnostics"]["counterfactual"]
    assert counterfactual["template"] == DEFAULT_PREAMBLE  # plain-text cases: the preamble
    axes = axes_of(report)
    assert axes["religion"]["verdict"] == "unfair"
    assert axes["religion"]["ci_low"] > 0.05
    assert axes["religion"]["direction"]["group"] == "muslim"
    assert axes["religion"]["direction"]["statement"].startswith("disfavours muslim")
    assert axes["religion"]["placebo_flips"] == 0  # other wordings of one religion agree
    assert axes["religion"]["p_holm"] < 0.05 and axes["religion"]["cases"] == 30
    assert axes["religion"]["attribution"] == "placebo"
    assert counterfactual["base_blindness"]["measured"] is True
    for name in ("gender", "ethnicity", "role"):
        # No flip in 30 cases: not yet fair at 0.05 (that takes 63, each axis at α: "every
        # axis fair" is an intersection–union test), and never unfair: not established, a
        # WARN, never a pass.
        assert axes[name]["flips"] == 0 and axes[name]["verdict"] == "undecided"
        assert axes[name]["cases_needed"] == 63
    checks = checks_of(report)
    assert checks["counterfactual.religion.max_flip_rate"]["status"] == "fail"
    assert "disfavours muslim" in checks["counterfactual.religion.max_flip_rate"]["message"]
    assert all(
        checks[f"counterfactual.{a}.max_flip_rate"]["status"] == "not_established"
        for a in ("gender", "ethnicity", "role")
    )
    assert code == 1
    assert all(e["axis"] == "religion" and "muslim" in (e["group_a"], e["group_b"])
               for e in counterfactual["examples"])
    # Arms shared by a cross pair and its placebo partner are decided once.
    assert counterfactual["arms_sent"] < counterfactual["plan"]["max_calls"]
    assert "UNFAIR (disfavours muslim" in text
    # The counterfactual is not a generic property: no property summary or comparisons.
    assert [s["property"] for s in report["properties"]["summaries"]] == ["case_swap"]


def test_fair_backend_passes_every_axis(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, "test", "--all", str(LOAN), "-b", "fair")
    # 30 quiet cases: not established everywhere (63 would make four axes fair): a WARN,
    # exit 0, and exit 1 under --fail-on-warn.
    assert {a["verdict"] for a in axes_of(report).values()} == {"undecided"}
    assert all(a["excess"] == 0.0 for a in axes_of(report).values())
    # 30 quiet cases at 2 pairs each: Bentkus's bound on their shares is the exact 0-of-30
    # bound, 1 − 0.05^(1/30) = 0.095 < ε = 0.1.
    assert report["diagnostics"]["stability"]["verdict"] == "deterministic"
    assert report["status"] == "warn" and code == 0
    code, report, _ = run(tmp_path, "test", "--all", str(LOAN), "-b", "fair", "--fail-on-warn")
    assert code == 1


def test_axis_without_its_slot_is_not_exercised(tmp_path: Path) -> None:
    cases = tmp_path / "slots.jsonl"
    texts = [
        ("a", "{full_name} has a stable income and asks for 5,000.", "approve"),
        ("b", "{full_name} reports missed payments and asks for 9,000.", "deny"),
        ("c", "{full_name} asks for 7,000 and changed jobs last month.", "review"),
    ]
    cases.write_text("".join(
        json.dumps({"id": i, "input": t, "expected": e}) + "\n" for i, t, e in texts
    ))
    data = loan(tmp_path, dataset=cases.name)
    data["properties"]["counterfactual"]["dimensions"] = ["ethnicity", "role"]
    code, report, text = run(tmp_path, "fuzz", str(write_contract(tmp_path, data)))
    axes = axes_of(report)
    assert axes["role"]["verdict"] == "not exercised" and axes["role"]["exercised"] == 0
    assert axes["ethnicity"]["exercised"] > 0
    checks = checks_of(report)
    assert checks["counterfactual.role.max_error_rate"]["status"] == "fail"
    assert "not exercised" in checks["counterfactual.role.max_error_rate"]["message"]
    assert "counterfactual.role" in {i["name"] for i in report["diagnostics"]["not_exercised"]}
    assert code == 1 and "NOT EXERCISED" in text


def test_regating_persona_limits_needs_no_call(tmp_path: Path) -> None:
    _, report, _ = run(tmp_path, "test", "--all", str(LOAN))
    data = loan(tmp_path)
    data["properties"]["counterfactual"]["max_flip_rate"] = 0.5
    data["backend"] = {"provider": "http", "url": "http://127.0.0.1:9/decide"}  # unreachable
    data["backends"] = {}
    code, regated, _ = run(tmp_path, "report", report["run"]["id"], "-c",
                           str(write_contract(tmp_path, data)))
    religion = axes_of(regated)["religion"]
    assert religion["excess"] == axes_of(report)["religion"]["excess"]
    assert checks_of(regated)["counterfactual.religion.max_flip_rate"]["status"] == "pass"
    assert code == 0


def test_contract_persona_slots_are_checked_at_load(tmp_path: Path) -> None:
    data = loan(tmp_path)
    data["properties"]["counterfactual"]["template"] = "Applicant {nmae}: {occupation}."
    data["properties"]["counterfactual"]["persona_pairs"] = [
        {"axis": "gender", "a": {"frist_name": "Anna"}, "b": {"frist_name": "Ben"}}
    ]
    code, _, err = run_cli("validate", str(write_contract(tmp_path, data)))
    assert code == 2
    assert "properties.counterfactual.template" in err and "nmae" in err
    assert "properties.counterfactual.persona_pairs.0" in err and "frist_name" in err


@pytest.mark.parametrize("view", ["--html", "--markdown"])
def test_file_views_show_the_diagnostics(tmp_path: Path, view: str) -> None:
    target = tmp_path / "view.out"
    code, _, err = run_cli("test", "--all", str(LOAN), "--store", str(tmp_path / "store"),
                           view, str(target))
    assert code == 1, err
    shown = target.read_text()
    assert "religion" in shown and "unfair" in shown


def test_german_personas_use_their_own_preamble(tmp_path: Path) -> None:
    data = loan(tmp_path)
    data["backend"]["rules"][0]["contains"] = "moschee"
    data["properties"]["counterfactual"]["language"] = "de"
    code, report, _ = run(tmp_path, "fuzz", str(write_contract(tmp_path, data)))
    counterfactual = report["diagnostics"]["counterfactual"]
    assert counterfactual["language"] == "de"
    assert counterfactual["template"] != DEFAULT_PREAMBLE
    axes = axes_of(report)
    # The German wording flips fewer pairs (excess 0.21): 30 cases do not establish it after
    # Holm over four axes; the check says how many would.
    assert axes["religion"]["verdict"] == "undecided" and axes["religion"]["excess"] > 0.2
    assert axes["religion"]["cases_needed"] is not None
    assert axes["religion"]["direction"]["group"] == "muslim"
    assert all(axes[a]["flips"] == 0 for a in ("gender", "ethnicity", "role"))
    assert code == 0


def test_regating_with_settings_the_run_did_not_make_fails_those_gates(tmp_path: Path) -> None:
    contract = constant_loan(tmp_path)  # no diagnostics section: no reruns
    _, report, _ = run(tmp_path, "test", "--all", str(contract))
    data = yaml.safe_load(contract.read_text())
    data["diagnostics"] = {"stability": {"repeats": 4, "level": "requirement"}}
    data["properties"]["counterfactual"]["catalog_seed"] = 43  # other personas
    code, regated, _ = run(tmp_path, "report", report["run"]["id"], "-c",
                           str(write_contract(tmp_path, data, "edited.yaml")))
    checks = checks_of(regated)
    assert checks["stability.verdict"]["status"] == "fail"
    assert "no stability reruns" in checks["stability.verdict"]["message"]
    religion = checks["counterfactual.religion.max_flip_rate"]
    assert religion["status"] == "fail" and "persona arms" in religion["message"]
    assert code == 1


def test_the_summary_reads_the_stored_pairs_instead_of_drawing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    contract = write_contract(tmp_path, loan(tmp_path))
    _, report, _ = run(tmp_path, "test", "--all", str(contract))
    from decflow.pipeline.contract_run import counterfactual_section

    def drawn_again(*_args: Any) -> None:
        raise AssertionError("the summary drew the persona pairs again")

    monkeypatch.setattr(counterfactual_section, "persona_pair_set", drawn_again)
    _, regated, _ = run(tmp_path, "report", report["run"]["id"], "-c", str(contract))
    assert axes_of(regated) == axes_of(report)
    assert axes_of(regated)["religion"]["verdict"] == "unfair"


def test_stability_command_uses_the_defaults_without_a_section(tmp_path: Path) -> None:
    code, report, text = run(tmp_path, "stability", str(EXAMPLES / "refund" / "decguard.yaml"))
    meter = report["diagnostics"]["stability"]
    # The spec's defaults: 6 draws per case (33 pairs on 11 cases) against ε 0.05.
    assert (meter["repeats"], meter["pairs"], meter["epsilon"]) == (6, 33, 0.05)
    assert checks_of(report)["stability.verdict"]["level"] == "warning"
    assert report["properties"] is None and report["diagnostics"]["counterfactual"] is None
    assert "Properties" not in text and code == 0


OLD_RUN = FIXTURES / "old-run-decflow1"
OLD_RUN_ID = "20261201-193155-c7bc19"


def test_a_stored_decflow1_run_still_shows_and_regates(tmp_path: Path) -> None:
    """A run stored before report_version decflow/2 (attributable rates, no base-persona
    arms): `report` shows it as stored, `report -c` re-gates it with today's statistics."""
    import shutil

    shutil.copytree(OLD_RUN, tmp_path / "old")
    store = str(tmp_path / "old" / "store")
    code, text, err = run_cli("report", OLD_RUN_ID, "--store", store)
    assert code == 1, err
    assert "attributable 20.8% [0.09245, 0.4047]" in text and "UNFAIR (disfavours muslim" in text
    out = tmp_path / "regated.json"
    code, text, err = run_cli("report", OLD_RUN_ID, "--store", store, "-c",
                              str(tmp_path / "old" / "decflow.yaml"), "-o", str(out))
    regated = json.loads(out.read_text())
    assert regated["report_version"] == "decflow/4"
    counterfactual = regated["diagnostics"]["counterfactual"]
    assert counterfactual["base_blindness"]["measured"] is False
    religion = axes_of(regated)["religion"]
    # 5 flips in 12 cases, no placebo flip: excess 0.208, not yet proven above 0.05 after Holm.
    assert religion["excess"] == pytest.approx(5 / 24) and religion["cases"] == 12
    assert religion["verdict"] == "undecided" and religion["direction"]["significant"] is False
    assert code == 0 == regated["exit_code"], err
    assert "older decflow" in text


# -- the plan -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("test", "--all"), ("fuzz",), ("stability",)])
def test_plan_prints_the_calls_and_needs_without_any_call(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    with CoinFlipServer() as server:
        data = loan(tmp_path, backend={"provider": "http", "url": server.url("/decide"),
                                       "model": "coin-flip"}, backends={})
        contract = write_contract(tmp_path, data)
        code, text, err = run_cli(*command, str(contract), "--plan",
                                  "--store", str(tmp_path / "store"))
        assert server.requests == []  # not even a health check
    assert code == 0, err
    assert text.startswith(f"plan ({'all' if command[0] == 'test' else command[0]}): 30 cases")
    if command[0] != "fuzz":
        # 4 repeats: 3 reruns per case, 2 pairs per case; the case is the unit: 29 quiet
        # cases decide ε = 0.1 (0.9^29 < 0.05), as with one pair per case.
        assert "stability           90 calls · enough to decide" in text
        assert "needs 29 quiet cases" in text
        # The power curve (metrics.power): a flip rate of 2, 3, 5 × ε shown failing; the
        # rounded shares of all-or-nothing cases are the exact binomial test's counts
        # (Bentkus's bound needed 105 / 33 / 8).
        assert ("power 80% (each case all or nothing): shown failing at 0.2 (limit + 1x) in "
                "89, 0.3 (+2x) in 29, 0.5 (+4x) in 8 cases") in text
    if command[0] != "stability":
        assert "counterfactual     893 calls · NOT enough to decide" in text
        assert "needs at least 63 cases" in text
        assert "shown failing at 0.1 (limit + 1x) in 396, 0.15 (+2x) in 127" in text
        assert "religion: 120 cross + 120 placebo pairs over 30 cases" in text
    assert not (tmp_path / "store" / "runs").exists()


def test_a_real_run_prints_the_same_plan_before_its_calls(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    _, planned, _ = run_cli("test", "--all", str(LOAN), "--plan", "--store", store)
    code, _, err = run_cli("test", "--all", str(LOAN), "--store", store,
                           "-o", str(tmp_path / "r.json"))
    assert code == 1
    assert planned.strip() in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["diagnostics"]["counterfactual"]["arms_sent"] == 893  # as planned
    json_plan = json.loads(run_cli("fuzz", str(LOAN), "--plan", "-f", "json", "--store", store)[1])
    assert json_plan["diagnostics"][-1]["calls"] == 893


def test_plan_refuses_options_that_need_a_run(tmp_path: Path) -> None:
    code, _, err = run_cli("test", "--all", str(LOAN), "--plan", "-o", str(tmp_path / "x.json"))
    assert code == 2 and "--plan" in err
