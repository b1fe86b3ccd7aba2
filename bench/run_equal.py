"""Before/after: the same commands run by two decflow source trees give the same contract
hashes, reports and views (run ids, times, store paths and stage keys masked).

For each of the reference examples (spam, refund, severity) and for `refund-every-gate` (the
refund example with every golden, regression and production gate set at both levels, decflow's
`max_smooth_ece`, evidence gating, a `sequential:` section and its plan), runs `validate`,
`test`, `fuzz`, `test --all`, a sequential run, `--plan`, a diff (point and evidence gated,
with rerun noise), a re-gate with an edited contract and production checks with and without
a baseline, from each tree (`PYTHONPATH=TREE/src`), and compares every output: exit code,
stdout, stderr (progress lines dropped), report.json, Markdown, HTML and JUnit files. Backend
latency is pinned to 0 ms in both trees (the mock answers in microseconds; its measured
latency would differ between any two runs).

usage: python bench/run_equal.py BEFORE_TREE AFTER_TREE [--keep DIR]
       (a tree of an earlier commit: `git archive COMMIT src | tar -x -C /tmp/before`)
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests/fixtures/reference/decguard-examples"

# Runs decflow's command line with every backend call's measured latency 0 ms.
PINNED = (
    "import sys, time, types\n"
    "import decflow.backends.engine as engine\n"
    "engine.time = types.SimpleNamespace(perf_counter=lambda: 0.0, time=time.time,"
    " monotonic=time.monotonic, sleep=time.sleep)\n"
    "from decflow.__main__ import main\n"
    "sys.argv[0] = 'decflow'\n"
    "main()\n"
)
MASKS = (
    (re.compile(r"\d{8}-(<wbr>)?\d{6}-(<wbr>)?[0-9a-f]{6}"), "<run>"),
    # a baseline check run is named by its report's hash, which holds its id and time
    (re.compile(r"(run <run> · (\d+ records · )?)sha256:[0-9a-f]+"), r"\1sha256:<report>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"(?<!sha256:)\b[0-9a-f]{64}\b"), "<key>"),
)
PROGRESS = re.compile(r"calls/s|done in|^\s*\d+/\d+ calls")

EVERY_GOLDEN = {"min_accuracy": 0.6, "min_macro_f1": 0.5, "max_nll": 2.0, "max_brier": 0.9,
                "max_ece": 0.3, "min_coverage": 0.3, "max_abstention_rate": 0.7,
                "min_selective_accuracy": 0.5, "max_error_rate": 0.1,
                "max_latency_p95_ms": 500, "max_smooth_ece": 0.3}
EVERY_REGRESSION = {"max_answer_flip_rate": 0.05, "max_accuracy_drop": 0.02,
                    "max_macro_f1_drop": 0.05, "max_ece_increase": 0.05,
                    "max_brier_increase": 0.05, "max_nll_increase": 0.1,
                    "max_mean_tv_distance": 0.03, "max_mean_confidence_shift": 0.05,
                    "max_error_rate_increase": 0.0, "max_latency_p95_increase_ms": 100,
                    "max_segment_accuracy_drop": 0.1}
EVERY_SEGMENT = {"min_accuracy": 0.7, "max_error_rate": 0.1, "max_ece": 0.3, "max_brier": 0.5,
                 "max_nll": 1.5, "min_threshold_coverage": 0.3, "max_abstention_rate": 0.8,
                 "max_fallback_rate": 0.7}
EVERY_PRODUCTION = {**EVERY_SEGMENT, "max_confidence_tv_distance": 0.2,
                    "max_accuracy_drop": 0.05, "max_ece_increase": 0.1, "max_smooth_ece": 0.3}


def every_gate_contract(work: Path) -> Path:
    """The refund example with every gate set (warnings tighter than requirements)."""
    document = yaml.safe_load((EXAMPLES / "refund/decguard.yaml").read_text())
    tighter = {k: (v * 1.2 if k.startswith("min_") else v / 2) for k, v in EVERY_GOLDEN.items()}
    document["requirements"] = EVERY_GOLDEN
    document["warnings"] = {k: v for k, v in tighter.items() if k != "max_error_rate"}
    document["regression"] = {**EVERY_REGRESSION, "segment_by": ["locale"], "gating": "evidence",
                              "min_segment_size": 2,
                              "warnings": {k: v / 2 for k, v in EVERY_REGRESSION.items()}}
    document["production"] = {
        "segments": ["locale"], "gating": "evidence",
        "requirements": EVERY_PRODUCTION,
        "warnings": {k: v / 2 for k, v in EVERY_PRODUCTION.items()},
        "segment_requirements": EVERY_SEGMENT,
        "segment_warnings": {k: v / 2 for k, v in EVERY_SEGMENT.items()},
    }
    document["sequential"] = {"alpha": 0.1, "batch": 3, "seed": 7}
    target = work / "every" / "decguard.yaml"
    target.parent.mkdir()
    shutil.copy(EXAMPLES / "refund/cases.jsonl", target.parent / "cases.jsonl")
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def edited(contract: Path) -> Path:
    """The contract with its golden requirements tightened (a re-gate that changes verdicts)."""
    document = yaml.safe_load(contract.read_text())
    document["requirements"] = {**document.get("requirements", {}), "min_accuracy": 0.95}
    target = contract.with_name("edited.yaml")
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def steps(work: Path) -> list[tuple[str, list[str]]]:
    """(name, command line) in order; `@name` stands for the report file of an earlier step
    and `#name` for its run id."""
    refund, spam, severity = (work / n / "decguard.yaml" for n in ("refund", "spam", "severity"))
    every = every_gate_contract(work)
    production = str(work / "refund/production.jsonl")
    drifted = str(work / "refund/production-drift.jsonl")
    out: list[tuple[str, list[str]]] = []
    for name, contract in (("refund", refund), ("spam", spam), ("severity", severity),
                           ("every", every)):
        out += [
            (f"{name}-validate", ["validate", str(contract)]),
            (f"{name}-test", ["test", str(contract), "--no-sequential"]),
            (f"{name}-fuzz", ["fuzz", str(contract)]),
            (f"{name}-all", ["test", "--all", str(contract), "--no-sequential"]),
            (f"{name}-plan", ["test", "--all", str(contract), "--plan", "--sequential",
                              "--order-seed", "3"]),
            (f"{name}-sequential", ["test", "--all", str(contract), "--sequential",
                                    "--order-seed", "3", "--batch", "2"]),
            (f"{name}-regate", ["report", f"#{name}-all", "-c", str(edited(contract))]),
        ]
    for name, contract in (("refund", refund), ("every", every)):
        out += [
            (f"{name}-biased", ["test", "--all", str(contract), "-b", "order_sensitive",
                                "--no-sequential"]),
            (f"{name}-diff", ["diff", f"@{name}-all", f"@{name}-biased", "-c", str(contract)]),
            (f"{name}-diff-noise", ["diff", f"#{name}-all", f"#{name}-biased", "-c",
                                    str(contract), "--noise-reruns", "2"]),
            (f"{name}-check", ["check", str(contract), "-d", production]),
            (f"{name}-check-drift", ["check", str(contract), "-d", drifted,
                                     "--baseline", production]),
            (f"{name}-check-diff", ["diff", f"#{name}-check", f"#{name}-check-drift", "-c",
                                    str(contract)]),
        ]
    out.append(("spam-diff-no-contract", ["diff", "@spam-test", "@spam-all"]))
    return out


REPORTING = ("test", "fuzz", "report", "diff", "check")


def mask(text: str, work: Path) -> str:
    text = text.replace(str(work), "<work>")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def mask_json(value: Any) -> Any:
    """A report without what a rerun changes: seconds measured, a baseline run's hash, the
    seed its shares were rounded with (drawn per run)."""
    if isinstance(value, dict):
        run = value.get("source") == "run"
        return {k: "<seconds>" if "seconds" in k else "<report>" if run and k == "hash"
                else "<seed>" if k == "rounding_seed" else mask_json(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    return value


def run_tree(tree: Path, work: Path, out: Path) -> None:
    """Every step with `tree`'s sources, its outputs masked into `out`."""
    for name in ("refund", "spam", "severity"):
        shutil.copytree(EXAMPLES / name, work / name)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "DECFLOW_STORE": str(work / "store"),
           "NO_COLOR": "1", "COLUMNS": "120"}
    env.pop("PREFECT_API_URL", None)
    out.mkdir(parents=True)
    runs: dict[str, str] = {}
    for name, line in steps(work):
        args = [runs.get(a[1:], a) if a.startswith("#") else
                str(work / f"{a[1:]}.json") if a.startswith("@") else a for a in line]
        if args[0] in REPORTING and "--plan" not in args:
            args += ["-o", str(work / f"{name}.json"), "--markdown", str(work / f"{name}.md"),
                     "--html", str(work / f"{name}.html"), "--junit", str(work / f"{name}.xml")]
        done = subprocess.run([sys.executable, "-P", "-s", "-c", PINNED, *args], cwd=work,
                              env=env, capture_output=True, text=True, check=False)
        stderr = "\n".join(line for line in done.stderr.splitlines()
                           if not PROGRESS.search(line))
        (out / f"{name}.out").write_text(f"exit {done.returncode}\n{done.stdout}")
        (out / f"{name}.err").write_text(stderr)
        report = work / f"{name}.json"
        if report.exists():
            data: dict[str, Any] = json.loads(report.read_text())
            run_id = (data.get("run") or {}).get("id")
            if run_id:
                runs[name] = run_id
        for suffix in ("json", "md", "html", "xml"):
            produced = work / f"{name}.{suffix}"
            if produced.exists():
                text = produced.read_text()
                if suffix == "json":
                    text = json.dumps(mask_json(json.loads(text)), indent=2)
                (out / f"{name}.{suffix}").write_text(text)
    for produced in out.iterdir():
        produced.write_text(mask(produced.read_text(), work))


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differing = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only {'after' if b.exists() else 'before'}")
            differing += 1
            continue
        if a.read_text() != b.read_text():
            differing += 1
            print(f"{name}: differs")
            diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                        "before", "after", lineterm="", n=1)
            print("\n".join(line[:300] for line in list(diff)[:40]))
    print(f"{len(names)} outputs compared, {differing} differ")
    return differing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--keep", type=Path, help="keep the masked outputs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        # the same work folder path for both trees, so nothing path-dependent can differ
        outputs = Path(args.keep) if args.keep else Path(scratch) / "outputs"
        for side, tree in (("before", args.before), ("after", args.after)):
            work = Path(scratch) / "work"
            run_tree(tree.resolve(), work, outputs / side)
            shutil.rmtree(work)
        return 1 if compare(outputs / "before", outputs / "after") else 0


if __name__ == "__main__":
    sys.exit(main())
