"""Parsing is bounded (issue 21, class 7): a contract whose YAML aliases expand far beyond
its size, and a report file past the size limit, are refused with exit 2 naming the limit,
in bounded time and memory. Measured in a child process of a child (so the figures are
the command's own): CPU seconds and peak resident memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from decflow.contracts.loader import MAX_EXPANDED_BYTES
from decflow.report.verify import MAX_REPORT_BYTES
from tests.support.console import CONSOLE

pytestmark = pytest.mark.slow

# Runs the command with 2 GB of address space at most (today's code would take gigabytes)
# and reports its exit code, CPU seconds and peak RSS (its children's usage, waited for).
MEASURE = textwrap.dedent("""
    import json, resource, subprocess, sys
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True, preexec_fn=limit,
                          timeout=120)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"code": done.returncode, "stderr": done.stderr,
                      "cpu_s": usage.ru_utime + usage.ru_stime,
                      "peak_mb": usage.ru_maxrss / 1024}))
""")


def measured(*args: str, cwd: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(CONSOLE), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def amplified(folder: Path) -> Path:
    """About 140 KB of YAML: one 60 KB rule, an anchor of 8 of them (480 KB once
    expanded), and 2,000 backends that each name that anchor as their rules — about 1 GB
    once expanded, in 160k nodes (under the node count that guarded it before)."""
    rule = f"&rule {{contains: {'x' * 60_000}, probabilities: {{a: 0.5, b: 0.5}}}}"
    lines = [  # a valid contract: every anchor sits in a field that is validated and hashed
        'schema_version: "0.1"',
        "decision: {name: amp, type: choice, options: [a, b]}",
        "backend: {provider: mock, rules: &rules [" + ", ".join([rule, *["*rule"] * 7]) + "]}",
        "backends:",
        *(f"  b{i}: {{provider: mock, rules: *rules}}" for i in range(2000)),
    ]
    path = folder / "amplified.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert 100_000 < path.stat().st_size < 200_000
    return path


def test_an_anchor_amplified_contract_is_refused_in_bounded_time_and_memory(
    tmp_path: Path,
) -> None:
    contract = amplified(tmp_path)
    for command in (["validate", str(contract)], ["test", str(contract)]):
        found = measured(*command, cwd=tmp_path)
        assert found["code"] == 2, found
        assert f"{MAX_EXPANDED_BYTES:,} bytes" in str(found["stderr"]), found
        assert float(found["cpu_s"]) < 2.0, found  # type: ignore[arg-type]
        assert float(found["peak_mb"]) < 200, found  # type: ignore[arg-type]


def test_a_report_file_past_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    report = tmp_path / "huge.json"
    with report.open("wb") as out:  # sparse: the size without the bytes
        out.truncate(MAX_REPORT_BYTES + 1)
    found = measured("report", str(report), cwd=tmp_path)
    assert found["code"] == 2 and f"{MAX_REPORT_BYTES:,} bytes" in str(found["stderr"]), found
    assert float(found["peak_mb"]) < 200, found  # type: ignore[arg-type]
