"""How far llama-cpp-python's prompt cache moves the `sequence` readout's label values, both
scorings, without the server's per-token vocabulary sort: the model loaded in this process
by the server's own loader (`LlamaProxy.load_llama_from_model_settings`, the settings the
end-to-end tests start the server with), each request made by the server's own call
(`Llama.create_completion`, its longest-prefix reuse included) without `logprobs`, and each
label's log probability read from the logits the request left, as the server computes it
(`Llama.logits_to_logprobs`). The echo readout through the server costs 15-30 s of server
CPU per decision on Gemma 3 (bench/README.md); here the same values cost a few evaluations.

For each of N decisions (the review-sentiment decisions of `openai_readouts.py`, the
`sequence` prompt of that model):

- fresh: the cache emptied by an unrelated one-token prompt, then prompt + label in one
  request, for each label (the reference);
- echo, cache warm: today's `echo` readout (prompt + label, one label after another) after
  the server evaluated a prompt sharing the decision's first words (a run's previous request
  shares some prefix with the next); the cut moves with the decision, or with `--every-cut`
  every cut of every decision is tried;
- prefix, cache warm: the prefix readout's requests (prompt + the label's first tokens,
  max_tokens 1) after the same warm prompt.

    python bench/prefix_spread.py --model gemma --decisions 20
    python bench/prefix_spread.py --model gemma --decisions 5 --every-cut
    python bench/prefix_spread.py --model gemma --splits 7,8     # where the values move

Prints, per comparison, the largest and the median |Δ| over decisions (each decision's
largest over its labels) of log P(label | prompt) and of its normalised probability.
`--splits` shows the cause: decision i's prompt evaluated from an empty cache in two
batches split after k tokens against one batch, the labels' first tokens at its end.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openai_readouts import REVIEWS, SENTIMENT, readouts
from tests.support.llm_server import gemma_gguf, smollm2_gguf

from decflow.backends.base import DecisionRequest
from decflow.backends.llm_prompts import continuation
from decflow.backends.openai import OpenAIBackend
from decflow.contracts.providers import OpenAISettings


def load(gguf: Path) -> Any:
    """The model as `python -m llama_cpp.server --n_ctx 2048 --n_threads 2 --logits_all
    true` loads it."""
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings

    settings = ModelSettings(model=str(gguf), n_ctx=2048, n_threads=2, logits_all=True,
                             verbose=False)
    return LlamaProxy.load_llama_from_model_settings(settings)


class Server:
    """The server's completion calls on one in-process model, values read from its logits
    (the rows of the positions a request left: evaluated by it, or kept from before, as
    the server's echo reads them)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def tokens(self, text: str) -> list[int]:
        """`text` as the server tokenizes a completion prompt (BOS, special tokens)."""
        return list(self.llm.tokenize(text.encode(), add_bos=True, special=True))

    def send(self, tokens: list[int]) -> None:
        """A one-token completion, as the server makes it (the same `generate`)."""
        self.llm.create_completion(tokens, max_tokens=1, temperature=0.0)

    def value(self, tokens: list[int], j: int) -> float:
        """log P(tokens[j] | tokens[:j]) from the row the last request left."""
        from llama_cpp import Llama

        return float(Llama.logits_to_logprobs(self.llm.scores[j - 1])[tokens[j]])

    def split(self, prompt: str, labels: dict[str, str]) -> tuple[int, dict[str, list[int]]]:
        start = len(self.tokens(prompt))
        found = {name: self.tokens(prompt + text) for name, text in labels.items()}
        assert all(len(t) > start for t in found.values()), "a label merges with the prompt"
        return start, found

    def fresh(self, prompt: str, labels: dict[str, str]) -> dict[str, float]:
        start, labelled = self.split(prompt, labels)
        found = {}
        for name, tokens in labelled.items():
            self.send(self.tokens("#"))
            self.send(tokens)
            found[name] = math.fsum(self.value(tokens, j) for j in range(start, len(tokens)))
        return found

    def echo(self, prompt: str, labels: dict[str, str]) -> dict[str, float]:
        start, labelled = self.split(prompt, labels)
        found = {}
        for name, tokens in labelled.items():
            self.send(tokens)
            found[name] = math.fsum(self.value(tokens, j) for j in range(start, len(tokens)))
        return found

    def prefix(self, prompt: str, labels: dict[str, str]) -> dict[str, float]:
        """Each label token after the prompt and the label's tokens before it (the scorer's
        requests; a text sent again is served from the cache, as the server does)."""
        start, labelled = self.split(prompt, labels)
        found = {}
        for name, tokens in labelled.items():
            total = 0.0
            for j in range(start, len(tokens)):
                self.send(tokens[:j])
                total += self.value(tokens, j)
            found[name] = total
        return found


def splits(server: Server, prompt: str, labels: dict[str, str]) -> list[float]:
    """For each k, the largest |Δ log P| of a label's first token after `prompt` evaluated
    in two batches (k tokens, then the rest) against one batch."""
    start, labelled = server.split(prompt, labels)
    tokens = labelled[next(iter(labelled))][:start]
    llm = server.llm

    def evaluated(*batches: list[int]) -> dict[str, float]:
        llm.reset()
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        for batch in batches:
            llm.eval(batch)
        return {name: server.value(ids, start) for name, ids in labelled.items()}

    whole = evaluated(tokens)
    return [max(abs(v - whole[name]) for name, v in evaluated(tokens[:k], tokens[k:]).items())
            for k in range(1, start)]


def cuts(prompt: str) -> list[int]:
    return [j for j, c in enumerate(prompt) if c in " \n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("smollm2", "gemma"), default="smollm2")
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--every-cut", action="store_true")
    parser.add_argument("--splits", default="", metavar="I,J",
                        help="only the batch-split table of these decisions")
    args = parser.parse_args()
    server = Server(load(smollm2_gguf() if args.model == "smollm2" else gemma_gguf()))
    settings = readouts(args.model, 1)["sequence, completions (prefix)"]
    validated = OpenAISettings.model_validate({"url": "http://127.0.0.1:9/v1", **settings})
    backend = OpenAIBackend("bench", "bench", validated, SENTIMENT)
    differences: dict[str, dict[str, list[float]]] = {}
    for i in map(int, filter(None, args.splits.split(","))):
        text = REVIEWS[i % len(REVIEWS)] + ("" if i < len(REVIEWS) else f" ({i})")
        prompt = backend.prompt_text(DecisionRequest(f"r{i}", SENTIMENT, text))
        moved = splits(server, prompt, {n: continuation(prompt, n) for n in SENTIMENT.labels})
        print(f"decision {i}, {len(moved) + 1} prompt tokens; split after k: "
              + " ".join(f"{k}:{v:.2g}" for k, v in enumerate(moved, 1)), flush=True)
    if args.splits:
        return

    def note(name: str, found: dict[str, float], reference: dict[str, float]) -> float:
        rows = differences.setdefault(name, {"nats": [], "probability": []})
        nats = max(abs(found[k] - reference[k]) for k in reference)
        rows["nats"].append(nats)
        shares = [{k: math.exp(v) / math.fsum(math.exp(x) for x in values.values())
                   for k, v in values.items()} for values in (found, reference)]
        rows["probability"].append(max(abs(shares[0][k] - shares[1][k]) for k in reference))
        return nats

    for i in range(args.decisions):
        text = REVIEWS[i % len(REVIEWS)] + ("" if i < len(REVIEWS) else f" ({i})")
        prompt = backend.prompt_text(DecisionRequest(f"r{i}", SENTIMENT, text))
        labels = {name: continuation(prompt, name) for name in SENTIMENT.labels}
        at = cuts(prompt)
        tried = range(len(at)) if args.every_cut else [(i * 7) % len(at)]
        as_left = server.prefix(prompt, labels)  # after the previous decision's fresh
        warm = {}
        for cut in tried:
            server.send(server.tokens(prompt[:at[cut]] + " #"))
            warm_echo = server.echo(prompt, labels)
            server.send(server.tokens(prompt[:at[cut]] + " #"))
            warm[cut] = (warm_echo, server.prefix(prompt, labels))
        reference = server.fresh(prompt, labels)
        note("prefix, cache as the previous decision left it, vs fresh", as_left, reference)
        for cut, (warm_echo, warm_prefix) in warm.items():
            e = note("echo, cache warm, vs fresh", warm_echo, reference)
            p = note("prefix, cache warm, vs fresh", warm_prefix, reference)
            print(f"  {i} cut {cut + 1} words: echo {e:.3g} prefix {p:.3g}", flush=True)
        print(f"  {i}: fresh {reference} prefix as left {as_left}", flush=True)
    print(f"\n{args.model}: {args.decisions} decisions × {len(SENTIMENT.labels)} labels"
          + (", every cut" if args.every_cut else "")
          + "; per comparison over decisions (each its largest |Δ| over its labels):")
    for name, rows in differences.items():
        nats, shares = rows["nats"], rows["probability"]
        print(f"  {name}: log P max {max(nats):.3g} median {statistics.median(nats):.3g} "
              f"nats; probability max {max(shares):.3g} median "
              f"{statistics.median(shares):.3g}; {sum(v > 1e-9 for v in nats)} of "
              f"{len(nats)} differ")


if __name__ == "__main__":
    main()
