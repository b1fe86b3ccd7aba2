"""JUnit XML of a report's checks, so CI systems show decflow's gates as tests.

Shape (the common JUnit schema): `<testsuites>` → one `<testsuite>` with `<properties>`
(report identity, overall status and exit code) → one `<testcase>` per check, in report
order. A check that holds is a bare testcase; one that does not carries
`<failure message="<check message>" type="requirement|warning">` whose text states metric,
comparison, threshold and value.

Warning-level gates: a failing warning is a `<failure>` too, so CI lists it, but it is
marked three ways so it can be told apart and filtered: the testcase name ends in
` (warning)` (as in the text view), its classname ends in `.warnings` (requirements:
`.requirements`) and the failure's `type` is `warning`. The run's exit code for warnings
alone stays 0 (unless `--fail-on-warn`); the suite property `exit_code` says so.

A check that is *not established* (the evidence decides neither way) is
`<skipped message="not established: …">`, counted in the suite's `skipped`. A limit-0 gate a
sequential run passed at `zero_limit` carries its message as `<system-out>`. The report's
headline is the suite property `message`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from decflow.metrics.evidence import ZERO_LIMIT
from decflow.report.kinds import kind_of, view_model
from decflow.report.model import CheckRow, Report
from decflow.untrusted import escape
from decflow.views.markdown import level_tag

NOT_ESTABLISHED = "not established"
# Characters XML 1.0 cannot carry at all that `escape` leaves as they are.
NOT_XML = re.compile("[\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """Text for an attribute or element: control and bidi characters shown as escapes like
    the terminal view; what XML still cannot carry replaced."""
    return NOT_XML.sub("\ufffd", escape("" if value is None else str(value), keep_newlines=True))


def suite_name(report: Report, kind: str) -> str:
    name = report.contract.name if report.contract else None
    if kind == "run":
        return f"decflow {report.mode or 'run'} {name}"
    return f"decflow {kind} {name}" if name else f"decflow {kind}"


def suite_properties(report: Report, kind: str) -> dict[str, Any]:
    contract, dataset, backend = report.contract, report.dataset, report.backend
    values = {
        "report_version": report.report_version,
        "kind": kind,
        "mode": report.mode,
        "status": report.status,
        "exit_code": report.exit_code,
        "created_at": report.created_at,
        "contract_hash": contract.hash if contract else None,
        "dataset_hash": dataset.hash if dataset else None,
        "backend": backend.name if backend else None,
        "model": backend.model if backend else None,
        "run_id": report.run.id if report.run else None,
        "message": report.first_line(),
    }
    return {k: v for k, v in values.items() if v is not None}


def skipped_message(message: str) -> str:
    """A not-established check's `<skipped message>`: it starts with ``not established:``
    (PRODUCT §4), then the check's own message (which may say it again, with the cases
    needed)."""
    return message if message.startswith(NOT_ESTABLISHED) else f"{NOT_ESTABLISHED}: {message}"


def testcase(check: CheckRow, prefix: str) -> ET.Element:
    level = check.level
    group = "warnings" if level == "warning" else "requirements"
    case = ET.Element("testcase", {
        "name": xml_text(check.gate + level_tag(level)),
        "classname": xml_text(f"{prefix}.{group}"),
        "time": "0",
    })
    if check.status == "pass" and ZERO_LIMIT in (check.evidence or {}).get("notes", []):
        # a pass that rests on zero_limit, not on every case: CI shows what it rests on
        ET.SubElement(case, "system-out").text = xml_text(check.message)
    elif check.status == "not_established":
        ET.SubElement(case, "skipped", {"message": xml_text(skipped_message(check.message))})
    elif check.status != "pass":
        failure = ET.SubElement(case, "failure", {
            "message": xml_text(check.message),
            "type": "warning" if level == "warning" else "requirement",
        })
        failure.text = xml_text(
            f"{check.metric} {check.comparison} {check.threshold:g}: value "
            f"{'n/a' if check.value is None else repr(check.value)} ({level}, "
            f"status {check.status})"
        )
    return case


def render_junit(shown: Report | dict[str, Any]) -> str:
    """The JUnit XML document (UTF-8, with declaration) of a run, diff or check report (a
    report dict is read as its kind's model first)."""
    head = view_model(shown)
    kind = kind_of(head)
    checks = head.checks
    skipped = sum(1 for c in checks if c.status == "not_established")
    failures = sum(1 for c in checks if c.status not in ("pass", "not_established"))
    counts = {"tests": str(len(checks)), "failures": str(failures), "errors": "0",
              "skipped": str(skipped), "time": "0"}
    root = ET.Element("testsuites", {"name": "decflow", **counts})
    created = (head.created_at or "")[:19]
    attributes = {"name": xml_text(suite_name(head, kind)), **counts, "hostname": "localhost"}
    if created:
        attributes["timestamp"] = created  # the schema's dateTime has no zone; it is UTC
    suite = ET.SubElement(root, "testsuite", attributes)
    listed = ET.SubElement(suite, "properties")
    for name, value in suite_properties(head, kind).items():
        ET.SubElement(listed, "property", {"name": name, "value": xml_text(value)})
    prefix = "decflow." + str((head.contract.name if head.contract else None) or kind)
    for check in checks:
        suite.append(testcase(check, xml_text(prefix)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
