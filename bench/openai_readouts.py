"""The `openai` backend's readouts side by side against a local llama-cpp-python server.

Starts `llama_cpp.server` on 127.0.0.1 with SmolLM2-135M-Instruct (or `--model gemma`, Gemma
3 270M base) the way the end-to-end tests do, plans each readout once (`prepare_run`: the
tokenizer probe or the echo check, timed apart), then decides the same review-sentiment
cases one after another through `OpenAIBackend.predict` and reports per readout: decisions
per second, HTTP requests per decision, client CPU ms per decision (this process) and server
CPU ms per decision (the server process, from /proc), plus the load average.

    python bench/openai_readouts.py                         # SmolLM2, 20 decisions a readout
    python bench/openai_readouts.py --model gemma --decisions 10 --sequence-decisions 2
    python bench/openai_readouts.py --only sequence          # one readout

Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from decflow.backends.base import BackendError, DecisionRequest, DecisionSpec
from decflow.backends.llm_prompts import continuation
from decflow.backends.llm_readouts import answer_logprob
from decflow.backends.openai import OpenAIBackend
from decflow.contracts.providers import OpenAISettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the servers and models exactly as the end-to-end tests start them
from tests.support.llm_server import LlamaServer, gemma_gguf, smollm2_gguf

SENTIMENT = DecisionSpec("review_sentiment", "choice", ("positive", "negative", "neutral"),
                         "What is the sentiment of this review?")
REVIEWS = [
    "The food was wonderful and the staff were very kind.",
    "Cold soup, rude waiter, and we waited an hour. Never again.",
    "The shop opens at nine and closes at six on weekdays.",
    "Best headphones I have ever owned, the sound is amazing.",
    "The charger broke after two days and support ignored me.",
]
CHATML = (
    "<|im_start|>system\nAnswer with one of the options, exactly as written.<|im_end|>\n"
    "<|im_start|>user\n{description}\nReview: {input}\nOptions:\n{options}<|im_end|>\n"
    "<|im_start|>assistant\n"
)
PLAIN = "{description}\nReview: {input}\nOptions:\n{options}\nAnswer:"


def readouts(model: str, samples: int) -> dict[str, dict[str, Any]]:
    sequence_prompt = CHATML if model == "smollm2" else PLAIN
    chosen = {
        "logprobs, chat": {"api": "chat", "readout": "logprobs"},
        "logprobs, completions": {"api": "completions", "readout": "logprobs"},
        "logprobs, completions, letters": {"api": "completions", "readout": "logprobs",
                                           "options_as": "letters"},
        "logprobs, completions (sequence's prompt)": {"api": "completions",
                                                      "readout": "logprobs",
                                                      "prompt": sequence_prompt},
        "sequence, completions (prefix)": {"api": "completions", "readout": "sequence",
                                           "prompt": sequence_prompt},
        "sequence, completions (echo)": {"api": "completions", "readout": "sequence",
                                         "prompt": sequence_prompt, "scoring": "echo"},
        f"sample ×{samples}, chat": {"api": "chat", "readout": "sample", "samples": samples,
                                     "temperature": 0.7},
    }
    if model == "gemma":  # a base model: no chat template
        chosen = {name: s for name, s in chosen.items() if s["api"] == "completions"}
        chosen[f"sample ×{samples}, completions"] = {
            "api": "completions", "readout": "sample", "samples": samples, "temperature": 0.7}
    return chosen


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def planned(server: LlamaServer, settings: dict[str, Any]) -> tuple[OpenAIBackend, float]:
    """The backend with its run's plan made (seconds it took); `scoring: echo` makes a
    `sequence` readout score as it did before the prefix scoring (every label echoed)."""
    chosen = {k: v for k, v in settings.items() if k != "scoring"}
    validated = OpenAISettings.model_validate({"url": server.url, "timeout_s": 600, **chosen})
    backend = OpenAIBackend("bench", "bench", validated, SENTIMENT)
    started = time.perf_counter()
    backend.prepare_run([SENTIMENT.labels])
    if settings.get("scoring") == "echo":
        assert backend.plan is not None
        backend.plan.scoring = {"method": "echo"}
    return backend, time.perf_counter() - started


def measure(server: LlamaServer, settings: dict[str, Any], decisions: int) -> dict[str, float]:
    assert server.process is not None
    pid = server.process.pid
    backend, planning = planned(server, settings)
    requests = _count_requests(backend)

    errors: list[str] = []

    async def decide_all() -> None:
        try:
            for i in range(decisions):
                text = REVIEWS[i % len(REVIEWS)]
                try:
                    await backend.predict(DecisionRequest(f"r{i}", SENTIMENT, text))
                except BackendError as exc:  # counted, as a run would record it
                    errors.append(f"{exc.kind}: {exc}")
        finally:
            await backend.aclose()

    cpu0, server0, wall0 = client_cpu_s(), server_cpu_s(pid), time.perf_counter()
    asyncio.run(decide_all())
    wall = time.perf_counter() - wall0
    return {
        "planning_s": planning,
        "decisions_per_s": decisions / wall,
        "requests_per_decision": requests["n"] / decisions,
        "client_cpu_ms": (client_cpu_s() - cpu0) * 1000 / decisions,
        "server_cpu_ms": (server_cpu_s(pid) - server0) * 1000 / decisions,
        "errored": len(errors),
        "first_error": errors[0] if errors else "",
    }


def _count_requests(backend: OpenAIBackend) -> dict[str, int]:
    """Counts the requests the backend sends from now on."""
    counter = {"n": 0}
    post = backend.caller.post_json

    async def counted(url: str, payload: Any) -> Any:
        counter["n"] += 1
        return await post(url, payload)

    backend.caller.post_json = counted  # type: ignore[method-assign]
    return counter


def tolerance(server: LlamaServer, settings: dict[str, Any], decisions: int,
              as_run: bool) -> None:
    """`sequence` scored by prefix (each label token after the cached prompt) against a
    fresh evaluation (the server's cache emptied by an unrelated one-token prompt, then
    prompt + label echoed in one batch), and against today's `echo` readout as it runs
    (labels echoed one after another, each reusing what the server holds), on the same
    decisions (today's readout as it runs only with `as_run`): the largest difference of a
    label's log probability and of a label's normalised probability."""
    prefix, _ = planned(server, settings)
    echo, _ = planned(server, {**settings, "scoring": "echo"})
    assert prefix.plan is not None and prefix.plan.scoring is not None
    print(f"  scoring planned: {prefix.plan.scoring}", flush=True)
    assert prefix.plan.scoring["method"] == "prefix", prefix.plan.scoring
    worst: dict[str, float] = {}

    def logprobs(prediction: Any) -> dict[str, float]:
        """log P(label | prompt) = log(share × label mass)."""
        mass = (prediction.metadata or {})["label_mass"]
        return {k: math.log(v * mass) for k, v in prediction.probabilities.items()}

    async def fresh(request: DecisionRequest) -> dict[str, float]:
        prompt = echo.prompt_text(request)
        found = {}
        for label in SENTIMENT.labels:
            await echo._post({"prompt": "#", "max_tokens": 1, "temperature": 0.0})
            text = continuation(prompt, label)
            body = await echo._post({"prompt": prompt + text, **echo.readout_options()})
            found[label] = answer_logprob(body, prompt + text, text)
        return found

    def note(name: str, a: dict[str, float], b: dict[str, float]) -> None:
        worst[name] = max(worst.get(name, 0.0), *(abs(a[k] - b[k]) for k in a))

    async def compare() -> None:
        try:
            for i in range(decisions):
                request = DecisionRequest(f"r{i}", SENTIMENT, REVIEWS[i % len(REVIEWS)]
                                          + ("" if i < len(REVIEWS) else f" ({i})"))
                a = await prefix.predict(request)
                if as_run:
                    b = await echo.predict(request)
                    note("probability prefix-echo", dict(a.probabilities),
                         dict(b.probabilities))
                new = await fresh(request)
                if as_run:
                    note("logprob echo-fresh", logprobs(b), new)
                total = math.fsum(math.exp(v) for v in new.values())
                note("logprob prefix-fresh", logprobs(a), new)
                note("probability prefix-fresh", dict(a.probabilities),
                     {k: math.exp(v) / total for k, v in new.items()})
                print(f"    {i}: prefix {logprobs(a)} fresh {new}", flush=True)
        finally:
            await prefix.aclose()
            await echo.aclose()

    asyncio.run(compare())
    print(f"\n{decisions} decisions × {len(SENTIMENT.labels)} labels, largest differences: "
          + "; ".join(f"{k} {v:.2e}" for k, v in worst.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--sequence-decisions", type=int, default=5,
                        help="decisions of the sequence readout scored by echo")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--only", default="",
                        help="readouts whose name contains this (comma-separated: any of them)")
    parser.add_argument("--tolerance", type=int, default=0, metavar="N",
                        help="compare sequence scoring by prefix with echo on N decisions")
    parser.add_argument("--as-run", action="store_true",
                        help="with --tolerance: also today's echo readout as it runs")
    args = parser.parse_args()
    gguf = smollm2_gguf() if args.model == "smollm2" else gemma_gguf()
    print(f"load average before: {os.getloadavg()}")
    if args.tolerance:
        with LlamaServer(gguf) as server:
            tolerance(server, readouts(args.model, args.samples)[
                "sequence, completions (prefix)"], args.tolerance, args.as_run)
        return
    rows = []
    with LlamaServer(gguf) as server:
        for name, settings in readouts(args.model, args.samples).items():
            if not any(part in name for part in args.only.split(",")):
                continue
            # scoring every label by echo is slow: fewer decisions
            count = args.sequence_decisions if settings.get("scoring") == "echo" \
                else args.decisions
            figures = measure(server, settings, count)
            rows.append((name, count, figures))
            print(f"  {name}: {figures}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"\n{args.model}, 3 labels, one decision at a time\n")
    print("| readout | decisions | errored | decisions/s | requests/decision "
          "| client CPU ms/decision | server CPU ms/decision | planning s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, count, f in rows:
        print(f"| {name} | {count} | {f['errored']} | {f['decisions_per_s']:.2f} | "
              f"{f['requests_per_decision']:.1f} | {f['client_cpu_ms']:.1f} | "
              f"{f['server_cpu_ms']:.0f} | {f['planning_s']:.2f} |")


if __name__ == "__main__":
    main()
