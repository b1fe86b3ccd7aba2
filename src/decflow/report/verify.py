"""Loading a stored report re-verifies what it contains; a tampered report is exit 2.

A report file is read as strict UTF-8 JSON (`decflow.strictjson`), must have the shape the
verifier and the views read (`report.model.RunReport`), every per-case result must satisfy the
decision invariants (exact labels, valid sum, argmax, confidence = p(selected)), and the
metrics, golden checks, status and exit code must be recomputable from the stored results
and gates. Every refusal names the file and the place (line and column, or field).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from decflow.contracts.gates import GOLDEN_GATES
from decflow.errors import ReportError
from decflow.gates import Check, golden_checks, status_of
from decflow.metrics.golden_cases import CaseValues, gate_metrics
from decflow.metrics.golden_metrics import golden_metrics
from decflow.report.model import REWRITE
from decflow.report.modes import mode_named
from decflow.report.run_report import RunReport
from decflow.report.versions import RUN_REPORT_VERSION, RUN_REPORT_VERSIONS
from decflow.strictjson import MAX_DEPTH, JsonProblem, loads
from decflow.textfile import TextProblem, decode_utf8

# A report nests case inputs and backend metadata (each at most MAX_DEPTH deep when read)
# a few levels down.
REPORT_MAX_DEPTH = MAX_DEPTH + 8
# A report file is read whole and parsed; past this size it is refused unread (a 100k-case
# `test --all` report is about 60 MB).
MAX_REPORT_BYTES = 256_000_000


def close(a: Any, b: Any) -> bool:
    """Equal up to 1e-9 relative on numbers (DecGuard computes a few logs and squares with
    other primitives, which can differ in the last bit), exactly equal otherwise."""
    if isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        return math.isclose(a, float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, int) and isinstance(b, float) and not isinstance(a, bool):
        return math.isclose(float(a), b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def load_report_file(path: str) -> dict[str, Any]:
    try:
        with Path(path).open("rb") as handle:
            # the size first: a file past the limit costs no memory (a pipe has no size
            # and is cut at the limit instead)
            too_big = os.fstat(handle.fileno()).st_size > MAX_REPORT_BYTES
            raw = b"" if too_big else handle.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read report ({exc.strerror or exc})") from None
    if too_big or len(raw) > MAX_REPORT_BYTES:
        raise ReportError(f"{path}: a report file is at most {MAX_REPORT_BYTES:,} bytes; this "
                          "one is larger (not read)")
    try:
        document = loads(decode_utf8(raw), max_depth=REPORT_MAX_DEPTH)
    except (TextProblem, JsonProblem) as exc:
        raise ReportError(f"{path}: not a JSON report: {exc}") from None
    if not isinstance(document, dict):
        raise ReportError(f"{path}: not a report (expected a JSON object)")
    return document


def _fail(source: str, where: str, message: str) -> ReportError:
    return ReportError(f"{source}: not a valid decflow report: {where}: {message}")


# What a check decides. Its message and evidence (bounds, "cases needed", the detectable
# effect) are prose and planning beside the verdict: their wording and the planning figures
# change between decflow versions, and an older run must still show and re-gate.
VERDICT_FIELDS = ("gate", "level", "metric", "comparison", "threshold", "value", "status")


def verdicts_of(checks: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    """The verdict-bearing fields of each check (a missing one is a KeyError)."""
    return [[check[name] for name in VERDICT_FIELDS] for check in checks]


def _check_result(source: str, index: int, item: dict[str, Any], report: dict[str, Any]) -> None:
    where = f"results.{index}"
    result, error = item.get("result"), item.get("error")
    if (result is None) == (error is None):
        raise _fail(source, where, "needs exactly one of result and error")
    if result is None:
        return
    labels = report["contract"]["labels"]
    probabilities = result.get("probabilities") or {}
    if list(probabilities) != labels or result.get("labels") != labels:
        raise _fail(source, f"{where}.result", "labels differ from the contract's")
    values = [float(probabilities[label]) for label in labels]
    tolerance = report["evaluation"]["probability_tolerance"]
    total = math.fsum(values)
    if abs(total - 1.0) > tolerance or any(v < 0 or not math.isfinite(v) for v in values):
        raise _fail(
            source, f"{where}.result", f"probabilities sum to {total:g}, outside 1 ± {tolerance:g}"
        )
    selected = labels[int(np.argmax(values))]
    if result.get("selected") != selected or result.get("confidence") != max(values):
        raise _fail(source, f"{where}.result", "selected/confidence is not the argmax")
    if result.get("case_id") != item.get("case_id"):
        raise _fail(source, f"{where}.result", "case id differs")
    if result.get("decision") != report["contract"]["name"]:
        raise _fail(source, f"{where}.result", "decision differs from the report's")
    if result.get("backend") != report["backend"]["name"]:
        raise _fail(source, f"{where}.result", "backend differs from the report's")


def recompute_metrics(report: dict[str, Any]) -> dict[str, Any]:
    labels = report["contract"]["labels"]
    index = {label: i for i, label in enumerate(labels)}
    items = report["results"]
    n, width = len(items), len(labels)
    probabilities = np.full((n, width), np.nan)
    errored = np.zeros(n, dtype=bool)
    latency = np.full(n, np.nan)
    kinds: list[str | None] = []
    for i, item in enumerate(items):
        if item["result"] is None:
            errored[i] = True
            kinds.append(item["error"]["kind"])
            continue
        kinds.append(None)
        probabilities[i] = [item["result"]["probabilities"][label] for label in labels]
        latency[i] = item["result"]["latency_ms"]
    expected = np.array(
        [index.get(item["expected"], -1) if item["expected"] is not None else -1
         for item in items],
        dtype=np.int64,
    )
    evaluation = report["evaluation"]
    metrics = golden_metrics(
        labels=labels,
        decision_type=report["contract"]["type"],
        probabilities=probabilities,
        errored=errored,
        expected_index=expected,
        latency_ms=latency,
        error_kinds=kinds,
        calibration_bins=evaluation["calibration_bins"],
        confidence_threshold=evaluation["confidence_threshold"],
    )
    measured = report["metrics"].get("extensions")
    if measured:  # the metrics of extension golden gates, each by its registered gate
        gates = [gate for gate in GOLDEN_GATES.entries() if gate.metric in measured]
        unknown = sorted(set(measured) - {gate.metric for gate in gates})
        if unknown:
            raise ValueError(f"metrics.extensions {unknown}: no golden gate registered here "
                             "measures them")
        arrays = {"probabilities": probabilities, "errored": errored,
                  "expected_index": expected, "latency_ms": latency}
        metrics["extensions"] = gate_metrics(gates, CaseValues.of(
            arrays, width, evaluation["confidence_threshold"],
            evaluation["calibration_bins"]))
    return metrics


def verify_run_report(report: dict[str, Any], source: str, *, advice: str = REWRITE,
                      verdicts: bool = True) -> RunReport:
    """Raise ReportError unless the report (decflow, or DecGuard 0.1) is internally
    consistent: its results, its metrics and (unless `verdicts` is False: a caller that judges
    the run again) its golden checks' verdicts and its status; return it typed."""
    if report.get("report_version") not in RUN_REPORT_VERSIONS:
        raise ReportError(
            f"{source}: not a decflow run report (report_version "
            f"{report.get('report_version')!r}, expected {RUN_REPORT_VERSION!r})"
        )
    typed = RunReport.read(report, source, advice=advice)
    try:
        seen: set[str] = set()
        for i, item in enumerate(report["results"]):
            if item["case_id"] in seen:
                raise _fail(source, f"results.{i}", f"duplicate case id '{item['case_id']}'")
            seen.add(item["case_id"])
            _check_result(source, i, item, report)
        if not close(recompute_metrics(report), report["metrics"]):
            raise _fail(source, "metrics", "do not match the stored results")
        checks = [Check.from_dict(c) for c in report["checks"]]
        if not verdicts:
            return typed
        if mode_named(report["mode"]).fills("golden_gates"):
            golden = [
                c.to_dict()
                for c in golden_checks(
                    report["metrics"], report["requirements"], report["warnings"],
                    report["contract"]["type"],
                )
            ]
            stored: list[Any] = verdicts_of(report["checks"][: len(golden)])
            expected: list[Any] = verdicts_of(golden)
            if report.get("sequential") is not None:
                # A sequential run judges its gates from evidence at each batch boundary
                # (see pipeline/contract_run/sequential/summary): the gates themselves must
                # still be the configuration's.
                stored, expected = [_gate_of(c) for c in stored], [_gate_of(c) for c in expected]
            if not close(stored, expected):
                raise _fail(source, "checks", "do not match stored metrics and configuration")
        status, exit_code = status_of(checks)
        warn_failed = status == "warn" and report["exit_code"] == 1  # --fail-on-warn
        if report["status"] != status or (report["exit_code"] != exit_code and not warn_failed):
            raise _fail(source, "status", "does not follow from the checks")
    except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ReportError(
            f"{source}: not a valid decflow report: missing or bad {exc} ({advice})"
        ) from None
    return typed


def _gate_of(verdict: list[Any]) -> list[Any]:
    """What a check is about (gate, level, metric, comparison, threshold), whatever its
    verdict."""
    return verdict[:5]
