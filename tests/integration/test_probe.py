"""`decflow probe` / `decflow.probe()`: agentverity's workflow on a plain agent callable.

External oracles: agentverity 0.3.0's captured quickstart (README and reference note A6:
28 calls, 0/8 pairs, Wilson [0.000, 0.324] at ε = 0.01, 75 % 'allow', two relations not
exercised) and the semantics of reference note A3–A6, A10.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import decflow
from decflow.errors import DecflowError
from decflow.probe import Observation, Relation, load, observe, ordered
from tests.support.cli import run_cli

QUICKSTART = ["hello", "a secret", "world", "foo"]


class Counting:
    """An agent wrapper that counts the calls the probe makes."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, text: str) -> Any:
        self.calls += 1
        return self.fn(text)


def my_gate(text: str) -> dict[str, str]:
    verdict = "block" if "secret" in text.lower() else "allow"
    return {"text": f"decision: {verdict}", "verdict": verdict}


def by_name(result: Any) -> dict[str, Any]:
    return {r.name: r for r in result.relation_results}


# -- the quickstart ----------------------------------------------------------------------


def test_quickstart_reads_as_agentverity_0_3_0() -> None:
    agent = Counting(my_gate)
    result = decflow.probe(agent, QUICKSTART)

    assert agent.calls == 28 == result.calls
    meter = result.meter
    assert (meter.verdict, meter.pairs, meter.flips) == ("undecided", 8, 0)
    # agentverity pooled the 8 pairs ([0, 0.324]); the input is the unit here: 4 quiet inputs.
    assert meter.measured_cases == 4 and meter.ci_low == 0.0 and meter.ci_high > 0.324
    assert meter.epsilon == 0.01 and meter.repeats == 5
    assert not result.is_stochastic

    blind = result.blindness
    assert (blind.blind, blind.skew, blind.modal_label, blind.distinct) == (
        False, 0.75, "allow", 2)
    assert not result.is_blind

    relations = by_name(result)
    assert list(relations) == ["normalization", "case_swap", "whitespace", "tool_selection"]
    for name in ("normalization", "tool_selection"):
        r = relations[name]
        assert (r.total, r.held, r.violated, r.skipped, r.exercised) == (4, 0, 0, 4, 0)
        assert r.violation_rate is None and r.is_vacuous
    for name in ("case_swap", "whitespace"):
        r = relations[name]
        assert (r.held, r.violated, r.skipped, r.violation_rate) == (4, 0, 0, 0.0)
    assert [r.name for r in result.vacuous_relations] == ["normalization", "tool_selection"]
    assert result.suite_is_meaningful
    # Two relations changed no input: not established, a WARN (exit 0), never a pass.
    assert result.exit_code == 0 and result.status == "warn"
    # PRODUCT §4's grammar: 2 of the 5 gates (blindness + 4 relations) not established
    assert result.headline == ("WARN 2/5: normalization.max_violation_rate not established; "
                               "tool_selection.max_violation_rate not established")
    assert result.labels == ("allow", "block")


def test_quickstart_without_reuse_costs_40_calls_and_reads_the_same() -> None:
    agent = Counting(my_gate)
    result = decflow.probe(agent, QUICKSTART, reuse_calls=False)
    assert agent.calls == 40 == result.calls
    assert result.meter.verdict == "undecided"
    assert result.blindness.skew == 0.75
    assert [r.exercised for r in result.relation_results] == [0, 4, 4, 0]
    kinds = result.observations["kind"].value_counts(sort=True)
    assert dict(kinds.iter_rows()) == {"meter": 20, "relation": 16, "blindness": 4}


def test_summary_is_diagnostics_first_and_names_what_was_not_exercised() -> None:
    text = decflow.render_text(decflow.probe(my_gate, QUICKSTART).to_dict())
    order = ["RERUN STABILITY METER", "BLINDNESS DETECTOR", "ORACLE GUIDANCE",
             "RELATION RESULTS", "RESULT"]
    positions = [text.index(heading) for heading in order]
    assert positions == sorted(positions)
    assert "flip rate:   0.0% (0/8 pairs)" in text
    # 4 quiet inputs, 2 pairs each: Bentkus's bound is the exact 1 − 0.05^(1/4) (unit tests).
    assert "bounds:      [0, 0.527" in text
    assert "(95% per side, input as unit) at epsilon=0.01" in text
    assert "inputs:      4, repeats: 5, layer: verdict" in text
    assert "skew:        75.0% ('allow' on 4 inputs)" in text
    assert "distinct:    2 verdicts" in text
    assert "UNDECIDED" in text
    assert "NOT EXERCISED: normalization, tool_selection." in text
    rows = {line.split()[0]: line.split() for line in text.splitlines()
            if line.strip().startswith(("normalization ", "case_swap ", "tool_selection "))}
    assert rows["normalization"][-2:] == ["n/a", "n/a"]
    assert rows["tool_selection"][-2:] == ["n/a", "n/a"]
    # 0 violations in 4 exercised inputs: exact one-sided bound 1 − 0.05^(1/4) = 0.5271.
    assert rows["case_swap"][-3:] == ["0.0%", "[0,", "0.5271]"]
    assert "agent calls: 28 (40 without call reuse)" in text


def test_the_text_view_leads_with_a_headline_in_the_one_grammar() -> None:
    report = decflow.probe(my_gate, QUICKSTART).to_dict()
    assert decflow.render_text(report).splitlines()[0] == report["headline"]
    # a relation the agent violates: one violation of 4 fails it (a count, limit 0), with
    # its exact bounds; a blind agent fails blindness.max_skew
    flips = Relation("shout", "invariant", str.upper,
                     lambda a, b: a.verdict == b.verdict or a.text.startswith("decision: b"))

    def upper_blocks(text: str) -> dict[str, str]:
        verdict = "block" if "secret" in text.lower() or text == "WORLD" else "allow"
        return {"text": f"decision: {verdict}", "verdict": verdict}

    violated = decflow.probe(upper_blocks, QUICKSTART, relations=[flips]).to_dict()
    low = 1 - 0.95 ** (1 / 4)  # P(X >= 1) = 0.05 of 4; the upper one P(X <= 1) = 0.05
    assert violated["headline"] == (f"FAIL 1/2: shout.max_violation_rate 0.25 [{low:.4g}, "
                                    "0.7514] > 0")
    assert decflow.render_text(violated).splitlines()[0] == violated["headline"]
    blind = decflow.probe(lambda text: {"text": "allow", "verdict": "allow"}, QUICKSTART,
                          relations=[]).to_dict()
    assert blind["headline"] == "FAIL 1/1: blindness.max_skew 1 >= 0.9"
    assert (blind["status"], blind["exit_code"]) == ("fail", 1)


# -- the meter and blindness --------------------------------------------------------------


def test_seeded_random_agent_is_stochastic() -> None:
    rng = random.Random(20260801)
    inputs = [f"request number {i}" for i in range(20)]
    result = decflow.probe(lambda text: rng.choice(["allow", "block"]), inputs, repeats=6,
                           relations=[])
    assert result.meter.pairs == 60
    assert result.is_stochastic and result.meter.ci_low > 0.01
    assert "STOCHASTIC" in decflow.render_text(result.to_dict())
    # the headline's qualifier says what the gates' verdict rests on
    meter = result.meter
    assert result.headline.startswith(f"PASS (stochastic: {meter.flips}/60 rerun pairs "
                                      f"flipped [{meter.ci_low:.4g}, ")


def test_constant_agent_is_blind_and_its_green_relations_are_vacuous() -> None:
    inputs = ["Approve this?", "Café order", "Delete   everything", "hello there", "x 1"]
    result = decflow.probe(lambda text: "allow", inputs)
    assert result.is_blind
    assert (result.blindness.skew, result.blindness.modal_label) == (1.0, "allow")
    assert not result.violated_relations  # everything "holds"...
    assert not result.suite_is_meaningful  # ...and says nothing
    assert result.exit_code == 1
    text = decflow.render_text(result.to_dict())
    assert "call:        BLIND" in text and "BLIND —" in text


def test_one_input_is_always_blind() -> None:
    assert decflow.probe(my_gate, ["only one"], relations=[]).is_blind


def test_two_inputs_split_evenly_at_threshold_one_half_is_blind() -> None:
    result = decflow.probe(my_gate, ["a secret", "fine"], relations=[], blindness_threshold=0.5)
    assert result.blindness.skew == 0.5 and result.is_blind  # skew >= threshold, inclusive


def test_failed_calls_make_a_series_incomplete_not_an_agreeing_pair() -> None:
    def flaky(text: str) -> str:
        if text == "boom":
            raise TimeoutError("upstream timed out")
        return "allow"

    result = decflow.probe(flaky, ["boom", "fine", "also fine"], relations=[])
    assert result.meter.n_incomplete == 1 and result.meter.pairs == 4
    assert result.blindness.n == 2  # the errored first draw is left out
    assert "TimeoutError: upstream timed out" in decflow.render_text(result.to_dict())


def test_every_call_failing_is_an_error() -> None:
    with pytest.raises(DecflowError, match="every one of the 10 agent calls failed"):
        decflow.probe(lambda text: None, ["a", "b"], relations=[])


# -- relations ------------------------------------------------------------------------------


def tool_agent(text: str) -> dict[str, Any]:
    """Same verdict always; the tool trajectory changes when the text has capitals."""
    tools = ["search", "escalate"] if any(c.isupper() for c in text) else ["search"]
    return {"verdict": "answer", "text": "done", "tools": tools}


def test_tools_layer_relation_catches_case_sensitive_tool_choice() -> None:
    inputs = ["refund my order", "where is my parcel", "cancel the subscription"]
    on_verdict = by_name(decflow.probe(tool_agent, inputs))
    assert on_verdict["case_swap"].violated == 0  # the verdict never moves

    result = decflow.probe(tool_agent, inputs, layer="tools")
    case = by_name(result)["case_swap"]
    assert (case.held, case.violated, case.violation_rate) == (0, 3, 1.0)
    assert result.exit_code == 1
    assert "violated: case_swap" in decflow.render_text(result.to_dict())


def test_tool_selection_is_exercised_by_accented_input() -> None:
    def accent_tools(text: str) -> dict[str, Any]:
        tools = ["translate", "search"] if any(ord(c) > 127 for c in text) else ["search"]
        return {"verdict": "answer", "tools": tools}

    result = decflow.probe(accent_tools, ["résumé review", "plain text", "naïve   question"])
    relations = by_name(result)
    selection = relations["tool_selection"]
    assert (selection.exercised, selection.violated, selection.skipped) == (2, 2, 1)
    assert relations["normalization"].violated == 0  # verdict layer: same answer
    assert "PARTIAL: tool_selection ran on 2/3 inputs" in decflow.render_text(result.to_dict())


def test_custom_monotone_relation_and_identity_skip() -> None:
    order = ["allow", "review", "block"]

    def escalating(text: str) -> str:
        return "block" if "URGENT" in text else ("review" if "?" in text else "allow")

    urgent = Relation("escalation", "monotone", lambda s: s + " URGENT", ordered(order))
    same = Relation("identity", "invariant", lambda s: s, lambda a, b: a == b)
    agent = Counting(escalating)
    result = decflow.probe(agent, ["ok", "really?", "fine"], relations=[urgent, same])
    relations = by_name(result)
    assert (relations["escalation"].held, relations["escalation"].violated) == (3, 0)
    assert relations["identity"].is_vacuous and relations["identity"].skipped == 3
    assert agent.calls == 3 * 5 + 3  # identity sent nothing
    assert result.relation_results[0].type == "monotone"


def test_every_relation_vacuous_is_not_established_never_a_pass() -> None:
    same = Relation("identity", "invariant", lambda s: s, lambda a, b: a == b)
    echo = Relation("echo", "invariant", str, lambda a, b: a == b)
    result = decflow.probe(my_gate, QUICKSTART, relations=[same, echo])
    assert all(r.is_vacuous for r in result.relation_results)
    assert not result.suite_is_meaningful
    report = result.to_dict()
    assert (report["status"], report["exit_code"]) == ("warn", 0)
    assert report["headline"] == ("WARN 2/3: identity.max_violation_rate not established; "
                                  "echo.max_violation_rate not established")
    assert [c["status"] for c in report["checks"]] == ["pass"] + ["not_established"] * 2
    assert "the transform changed no input" in report["checks"][1]["message"]
    assert "status:      warn — not established" in decflow.render_text(report)


def test_a_check_that_cannot_judge_counts_as_an_error() -> None:
    bad = Relation("needs-review", "monotone", str.upper, ordered(["review"]))
    result = decflow.probe(my_gate, ["hello", "a secret"], relations=[bad])
    r = result.relation_results[0]
    assert (r.errors, r.exercised, r.violation_rate) == (2, 0, None) and r.is_vacuous


def test_relations_empty_is_diagnostics_only_and_meaningful() -> None:
    agent = Counting(my_gate)
    result = decflow.probe(agent, QUICKSTART, relations=[])
    assert agent.calls == 20 and result.relation_results == ()
    assert result.suite_is_meaningful
    assert "none requested" in decflow.render_text(result.to_dict())


def test_relation_validation() -> None:
    with pytest.raises(ValueError, match="type must be one of"):
        Relation("x", "equivalent", str.upper, lambda a, b: True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty name"):
        Relation(" ", "invariant", str.upper, lambda a, b: True)
    twice = Relation("x", "invariant", str.upper, lambda a, b: True)
    with pytest.raises(DecflowError, match="used twice"):
        decflow.probe(my_gate, QUICKSTART, relations=[twice, twice])


# -- inputs, answers, settings -----------------------------------------------------------


def test_duplicate_and_empty_inputs_are_refused() -> None:
    with pytest.raises(DecflowError, match=r"inputs\[2\] repeats inputs\[0\]"):
        decflow.probe(my_gate, ["hello", "world", "hello"])
    with pytest.raises(DecflowError, match="no inputs"):
        decflow.probe(my_gate, [])
    with pytest.raises(DecflowError, match="list of input strings"):
        decflow.probe(my_gate, "hello")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"repeats": 1}, "repeats must be"), ({"epsilon": 1.0}, "epsilon must be"),
     ({"blindness_threshold": 0.0}, "blindness_threshold"), ({"layer": "tokens"}, "layer")],
)
def test_settings_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DecflowError, match=message):
        decflow.probe(my_gate, QUICKSTART, **kwargs)


def test_answers_are_read_into_three_layers() -> None:
    assert observe("allow") == Observation("allow", "allow")
    mapping = observe({"allow": 0.2, "block": 0.6, "review": 0.2})
    assert mapping.verdict == "block" and mapping.probabilities is not None
    plain = observe({"text": "I refuse", "tools": ["policy_lookup"]})
    assert (plain.verdict, plain.key("verdict"), plain.key("tools")) == (
        None, "I refuse", "policy_lookup")

    class Answer:
        verdict = "allow"
        text = "fine"
        tools = ("a", "b")

    assert observe(Answer()).key("tools") == "a > b"
    for bad in (None, 3, {"verdict": "x", "extra": 1}, {"tools": "search"}):
        with pytest.raises(ValueError):
            observe(bad)


def test_probability_answers_give_the_meter_its_noise_floor() -> None:
    result = decflow.probe(
        lambda text: {"yes": 0.7, "no": 0.3} if "x" in text else {"yes": 0.1, "no": 0.9},
        ["x-ray", "hello", "box", "tree"], relations=[])
    assert result.labels == ("yes", "no")
    assert result.meter.mean_tv == 0.0 and result.meter.verdict == "undecided"


def test_import_decflow_is_light_and_never_imports_prefect() -> None:
    code = textwrap.dedent("""
        import sys
        import decflow
        assert "polars" not in sys.modules and "prefect" not in sys.modules
        probe = decflow.probe
        from decflow import probe as again
        assert callable(probe) and callable(again) and again.Relation
        assert "prefect" not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- CLI, store, contract -----------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with agent modules (unique names per test) as the working directory."""
    name = f"probe_agents_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        def build_gate():
            def gate(text):
                verdict = "block" if "secret" in text.lower() else "allow"
                return {"text": f"decision: {verdict}", "verdict": verdict}
            return gate

        def constant(text):
            return "allow"

        def mapping(text):
            if "urgent" in text.lower():
                return {"high": 0.8, "low": 0.2}
            return {"high": 0.1, "low": 0.9}

        NOT_CALLABLE = 3
    """))
    (tmp_path / "seeds.txt").write_text("\n".join(QUICKSTART) + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DECFLOW_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def module_of(project: Path) -> str:
    return next(project.glob("probe_agents_*.py")).stem


def test_cli_probe_prints_the_report_and_keeps_the_run(project: Path) -> None:
    agent = f"{module_of(project)}:build_gate"
    code, out, _err = run_cli("probe", "--agent", agent, "--inputs", "seeds.txt")
    assert code == 0, out
    assert "agent calls: 28 (40 without call reuse)" in out
    assert "NOT EXERCISED: normalization, tool_selection." in out

    code, listing, _ = run_cli("runs")
    assert code == 0 and " probe " in listing and agent in listing
    run_id = listing.splitlines()[1].split()[0]  # below the header

    stored = load(project / "store", run_id)
    assert stored.calls == 28 and stored.meter.pairs == 8
    table = stored.observations
    assert table.height == 28
    assert set(table["kind"]) == {"meter", "relation"}
    assert table.filter(pl.col("kind") == "relation")["relation"].unique().sort().to_list() == [
        "case_swap", "whitespace"]
    report = json.loads((project / "store" / "runs" / run_id / "report.json").read_text())
    assert stored.to_dict() == report


def test_cli_json_output_no_reuse_and_options(project: Path) -> None:
    agent = f"{module_of(project)}:build_gate"
    code, out, _ = run_cli("probe", "--agent", agent, "--inputs", "seeds.txt", "-f", "json",
                           "--no-reuse", "--repeats", "4", "--epsilon", "0.05",
                           "-o", "probe.json")
    assert code == 0
    report = json.loads(out)
    assert report["kind"] == "probe" and report["calls"]["made"] == 4 * 4 + 4 + 2 * 8
    assert report["meter"]["pairs"] == 8 and report["meter"]["epsilon"] == 0.05
    assert json.loads((project / "probe.json").read_text()) == report


def test_cli_exit_codes(project: Path) -> None:
    module = module_of(project)
    code, out, _ = run_cli("probe", "--agent", f"{module}:constant", "--inputs", "seeds.txt")
    assert code == 1 and "BLIND" in out

    (project / "dupes.txt").write_text("hello\nworld\nhello\n")
    (project / "empty.txt").write_text("\n  \n")
    failures = [
        (["--agent", "no_such_module_xyz:f", "--inputs", "seeds.txt"], "cannot import"),
        (["--agent", f"{module}:missing", "--inputs", "seeds.txt"], "has no attribute"),
        (["--agent", f"{module}:NOT_CALLABLE", "--inputs", "seeds.txt"], "not callable"),
        (["--agent", "nocolon", "--inputs", "seeds.txt"], "module:function"),
        (["--agent", f"{module}:constant", "--inputs", "dupes.txt"], "line 3 repeats line 1"),
        (["--agent", f"{module}:constant", "--inputs", "empty.txt"], "no inputs"),
        (["--agent", f"{module}:constant", "--inputs", "missing.txt"], "cannot read"),
        (["--agent", f"{module}:constant", "--inputs", "seeds.txt", "--layer", "x"], "layer"),
    ]
    for args, message in failures:
        code, _out, err = run_cli("probe", *args)
        assert code == 2 and message in err, (args, err)


def test_probe_converts_into_a_contract_that_test_all_accepts(project: Path) -> None:
    agent = f"{module_of(project)}:build_gate"
    code, _, err = run_cli("probe", "--agent", agent, "--inputs", "seeds.txt",
                           "--write-contract", "recorded")
    assert code == 0 and "contract written to" in err
    contract = project / "recorded" / "decflow.yaml"
    cases = [json.loads(line) for line in (project / "recorded" / "cases.jsonl").open()]
    assert [c["input"] for c in cases] == QUICKSTART
    assert [c["expected"] for c in cases] == ["allow", "block", "allow", "allow"]

    code, out, err = run_cli("test", str(contract), "--all", "-f", "json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["status"] == "warn"  # the meter on 4 inputs is not established
    assert report["metrics"]["classification"]["accuracy"] == 1.0
    summaries = {s["property"]: s for s in report["properties"]["summaries"]}
    assert set(summaries) == {"case_swap", "whitespace"}  # normalization changed nothing
    assert all(s["n_flips"] == 0 and s["n_evaluated"] for s in summaries.values())
    stability = report["diagnostics"]["stability"]
    assert (stability["verdict"], stability["pairs"]) == ("undecided", 8)  # as the probe said


def test_contract_records_probabilities_and_follow_ups_the_mock_cannot_fold() -> None:
    def agent(text: str) -> dict[str, float]:
        # Accent-sensitive on purpose: the normalised follow-up gets its own answer.
        return {"high": 0.8, "low": 0.2} if "é" in text or "urgent" in text else {
            "high": 0.3, "low": 0.7}

    result = decflow.probe(agent, ["urgent: server down", "café closed", "weekly report"])
    document = result.to_contract(as_yaml=False)
    assert isinstance(document, dict)
    assert document["decision"]["options"] == ["high", "low"]
    rules = {r["contains"]: r["probabilities"] for r in document["backend"]["rules"]}
    assert rules["café closed"] == {"high": 0.8, "low": 0.2}
    assert rules["cafe closed"] == {"high": 0.3, "low": 0.7}  # the follow-up as answered
    assert "normalization" in document["properties"]
    assert by_name(result)["normalization"].violated == 1

    with pytest.raises(DecflowError, match="at least two labels"):
        decflow.probe(lambda t: "allow", ["a", "b"]).to_contract()
    text = decflow.probe(lambda t: "allow", ["a", "b"]).to_contract(labels=["allow", "block"])
    assert isinstance(text, str) and "recording" in text


def test_contract_puts_longer_texts_first_so_each_input_finds_its_rule() -> None:
    result = decflow.probe(my_gate, ["secret", "the secret plan is fine", "plan"],
                           relations=[])
    document = result.to_contract(as_yaml=False)
    assert isinstance(document, dict)
    contains = [r["contains"] for r in document["backend"]["rules"]]
    assert contains == ["the secret plan is fine", "secret", "plan"]


def test_cli_report_shows_a_stored_probe(project: Path) -> None:
    agent = f"{module_of(project)}:build_gate"
    code, first, _ = run_cli("probe", "--agent", agent, "--inputs", "seeds.txt")
    run_id = run_cli("runs")[1].splitlines()[1].split()[0]  # below the header
    code, shown, err = run_cli("report", run_id)
    assert code == 0, err
    assert shown == first


def test_file_views_refuse_probe_reports(tmp_path: Path) -> None:
    from decflow.errors import DecflowError
    from decflow.views.outputs import write_views

    with pytest.raises(DecflowError, match="not available for probe reports"):
        write_views({"kind": "probe", "report_version": "decflow/1"},
                    html=str(tmp_path / "r.html"))
    assert not (tmp_path / "r.html").exists()
