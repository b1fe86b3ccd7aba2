"""The run modes: the stage graph each computes (PRODUCT §2) and the report sections each
fills, asked of one `Mode` by the pipeline, the verifier and the views."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from decflow.errors import DecflowError, ReportError
from decflow.pipeline.contract_run.runner import CONTRACT_RUN
from decflow.pipeline.spec import RunSpec
from decflow.report.modes import MODES, ModeName, mode_named
from decflow.report.run_report import RunReport
from tests.support.paths import FIXTURES

BASE = ("cases", "requests", "results")


def test_every_mode_name_has_a_mode() -> None:
    assert tuple(MODES) == get_args(ModeName)
    assert [mode_named(name).name for name in get_args(ModeName)] == list(get_args(ModeName))


@pytest.mark.parametrize(
    ("mode", "stages"),
    [
        ("test", (*BASE, "summary")),
        ("fuzz", (*BASE, "comparisons", "minimized", "summary")),
        ("all", (*BASE, "comparisons", "minimized", "summary")),
        ("stability", (*BASE, "summary")),
    ],
)
def test_the_stage_graph_of_each_mode(mode: ModeName, stages: tuple[str, ...]) -> None:
    spec = RunSpec("c.yaml", "store", "run", mode=mode)
    assert tuple(stage.name for stage in CONTRACT_RUN.stages_for(spec)) == stages


def test_the_stage_list_is_every_stage_in_graph_order() -> None:
    assert tuple(s.name for s in CONTRACT_RUN.stages) == (
        *BASE, "comparisons", "minimized", "summary")


@pytest.mark.parametrize(
    ("mode", "golden", "gated", "properties", "diagnostics"),
    [
        ("test", True, True, False, False),
        ("fuzz", False, False, True, True),  # fuzz-only: no golden metrics or failures
        ("all", True, True, True, True),
        ("stability", True, False, False, True),  # metrics shown, never gated
    ],
)
def test_the_sections_each_mode_fills(
    mode: str, golden: bool, gated: bool, properties: bool, diagnostics: bool
) -> None:
    found = mode_named(mode)
    assert (found.fills("golden"), found.fills("golden_gates"), found.fills("properties"),
            found.fills("diagnostics")) == (golden, gated, properties, diagnostics)


def test_only_the_runs_that_rerun_make_the_meter_calls() -> None:
    assert [m.name for m in MODES.values() if m.reruns] == ["all", "stability"]
    assert [m.name for m in MODES.values() if m.meter_by_default] == ["stability"]
    assert [m.name for m in MODES.values() if m.needs_a_property] == ["fuzz"]


def test_stage_flags_replace_name_checks() -> None:
    flagged = {flag: [s.name for s in CONTRACT_RUN.stages if getattr(s, flag)]
               for flag in ("verdict", "sharded", "restart_input")}
    assert flagged == {"verdict": ["summary"], "sharded": ["results"],
                       "restart_input": ["cases", "requests", "results"]}
    assert [s.name for s in CONTRACT_RUN.stages if not s.cached] == ["summary"]


def test_an_unknown_mode_is_refused_by_name() -> None:
    listed = r"unknown mode 'everything' \(modes: test, fuzz, all, stability\)"
    with pytest.raises(DecflowError, match=listed):
        mode_named("everything")
    report = json.loads((FIXTURES / "diff" / "refund-default.json").read_text())
    assert RunReport.read(report, "r.json").mode == "test"
    report["mode"] = "everything"
    with pytest.raises(ReportError) as refused:
        RunReport.read(report, "r.json")
    problems = str(refused.value).splitlines()[1:]
    assert len(problems) == 1 and problems[0].startswith("  mode: must be one of")
