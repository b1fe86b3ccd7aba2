"""The `openai` backend: label probabilities from any OpenAI-compatible server.

`api: chat` asks `<url>/chat/completions` (a fixed system message plus the prompt);
`api: completions` asks `<url>/completions` with one plain prompt (base models, or a chat
model whose markup is written into the prompt). See `llm_prompts`.

Three readouts (`settings.readout`):

- `logprobs`: one request with `max_tokens: 1` and the top 20 first-token candidates
  (`top_logprobs: 20` for chat, `logprobs: 20` for completions; the OpenAI API's legacy
  completions endpoint caps `logprobs` at 5 and refuses 20). When the model's most likely
  first token ends the text, the server generates nothing and returns no candidates; the
  request is then sent again with `min_tokens: 1` (measured with llama-cpp-python 0.3.36: the
  reported log probabilities stay as they were, end of text included, and another token is
  sampled). Candidates count for a label through the first pieces learnt from the server's
  tokenizer (`first_pieces`, `tokenizer`), or, with no tokenize endpoint, the conservative
  character rule.
- `sequence` (completions only): one scoring request per label with `echo: true,
  logprobs: 1, max_tokens: 1` (llama-cpp-python takes `max_tokens: 0` as "unlimited", and
  refuses a list of prompts), log P(label | prompt) read from the echoed prompt-token log
  probabilities, normalised over the labels (`llm_readouts`).
- `sample`: `samples` separate requests at `temperature` (no fixed seed; llama.cpp ignores
  `n`), each answer parsed to a label; the distribution is the share of parsed answers.

With `options_as: letters` the readouts work on the option codes and map them back to the
labels shown at those positions. What a run reads and how is decided once, before its first
call, by `prepare_run` (see `llm_plan`); a backend used outside a run (SDK, replay) makes
the same plan on its first request.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from decflow import interrupts
from decflow.backends.base import (
    Backend,
    BackendError,
    DecisionRequest,
    DecisionSpec,
    Health,
    InvalidResponse,
    Prediction,
)
from decflow.backends.call_keys import sent_to
from decflow.backends.first_pieces import table_key
from decflow.backends.httpclient import HttpCaller, json_object, origin_url, public_url
from decflow.backends.label_scoring import PrefixScorer, choose_scoring
from decflow.backends.llm_plan import ReadoutPlan, add_tables, check_characters
from decflow.backends.llm_prompts import (
    SYSTEM_MESSAGES,
    codes,
    continuation,
    default_prompt,
    parse_answer,
    parse_code,
    render,
)
from decflow.backends.llm_readouts import (
    answer_logprob,
    first_token_distribution,
    generated_nothing,
    normalised,
    path,
    top_candidates,
)
from decflow.backends.model_identity import ModelIdentity, is_llama_cpp, served_identity
from decflow.backends.tokenizer import Tokenizer, find_tokenizer, tokenize_candidates
from decflow.errors import ConfigurationError

TOP_LOGPROBS = 20  # the OpenAI chat API's maximum
SAMPLE_MAX_TOKENS = 32
RETRY_BACKOFF_S = 0.5
RETRY_STATUSES = frozenset({429, *range(500, 600)})
UNAVAILABLE_STATUSES = frozenset({429, 502, 503, 504})
ECHO_CHECK_TOLERANCE = 1e-3  # the same log probability computed twice by the same server
ECHO_CHECK_CANDIDATES = 5
PROBE_INPUT = "(an example input)"


class OpenAIBackend(Backend):
    """`settings` has the attributes of `contracts.providers.OpenAISettings`; `decision` is
    the canonical decision spec."""

    provider = "openai"

    def __init__(self, name: str, model: str | None, settings: Any, decision: DecisionSpec) -> None:
        super().__init__(name, model)
        self.settings = settings
        self.decision = decision
        self.api: str = settings.api
        self.readout: str = settings.readout
        self.options_as: str = settings.options_as
        self.url: str = settings.url.rstrip("/")
        route = "chat/completions" if self.api == "chat" else "completions"
        self.endpoint = f"{self.url}/{route}"
        self.health_url: str = settings.health_url or f"{self.url}/models"
        self.prompt: str = settings.prompt or default_prompt(self.api, self.options_as)
        self.caller = HttpCaller(
            provider=self.provider,
            backend_name=name,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            retry_backoff_s=RETRY_BACKOFF_S,
            bearer_token_env=settings.api_key_env,
            retry_statuses=RETRY_STATUSES,
            unavailable_statuses=UNAVAILABLE_STATUSES,
        )
        self.served_models: set[str] = set()
        self.posted = 0  # completion requests sent
        self.plan: ReadoutPlan | None = None
        self._tokenizer: Tokenizer | None = None
        self._planning = asyncio.Lock()

    # -- requests ------------------------------------------------------------------------------

    def names(self, shown: Sequence[str]) -> tuple[str, ...]:
        """What the readout reads: the shown labels, or their option codes."""
        return codes(len(shown)) if self.options_as == "letters" else tuple(shown)

    def prompt_text(self, request: DecisionRequest) -> str:
        value = request.input
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        description = (
            request.decision.description
            or self.decision.description
            or f"Decide '{request.decision.name}' for the input."
        )
        return render(self.prompt, description=description, text=text,
                      shown=request.decision.labels, options_as=self.options_as)

    def messages(self, request: DecisionRequest) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": SYSTEM_MESSAGES[self.options_as]},
            {"role": "user", "content": self.prompt_text(request)},
        ]

    async def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.model is not None:
            payload = {**payload, "model": self.model}
        self.posted += 1
        body = json_object(await self.caller.post_json(self.endpoint, payload))
        served = body.get("model")
        if isinstance(served, str) and served:
            self.served_models.add(served)
        return body

    async def _ask(self, request: DecisionRequest, **options: Any) -> dict[str, Any]:
        """One request for `request` through the configured API."""
        if self.api == "chat":
            return await self._post({"messages": self.messages(request), **options})
        return await self._post({"prompt": self.prompt_text(request), **options})

    # -- the run's plan ------------------------------------------------------------------------

    def prepare_run(self, presentations: Sequence[Sequence[str]]) -> dict[str, Any]:
        async def prepare() -> ReadoutPlan:
            try:
                return await self._make_plan(presentations or [self.decision.labels])
            finally:
                await self.caller.aclose()

        before = self.posted
        self.plan = interrupts.run(prepare())
        # the echo check and the scoring probes of `sequence` (tokenize requests are free)
        self.plan_requests = self.posted - before
        return self.plan.to_json()

    def use_plan(self, plan: Mapping[str, Any]) -> None:
        adopted = ReadoutPlan.from_json(plan)
        configured = (self.readout, self.api, self.options_as)
        if (adopted.readout, adopted.api, adopted.options_as) != configured:
            raise ConfigurationError(
                f"openai backend '{self.name}': the run's stored plan reads "
                f"{adopted.readout}/{adopted.api}/{adopted.options_as}, but the backend is "
                f"configured for {'/'.join(configured)}; start a new run"
            )
        self.plan = adopted

    async def _make_plan(self, presentations: Sequence[Sequence[str]]) -> ReadoutPlan:
        plan = ReadoutPlan(self.readout, self.api, self.options_as)
        name_sets = [self.names(shown) for shown in presentations]
        if self.readout == "logprobs":
            candidates = tokenize_candidates(self.url, self.settings.tokenize_url)
            try:
                tokenizer, tried = await find_tokenizer(self.caller, candidates, self.model)
            except BackendError as exc:
                raise ConfigurationError(
                    f"openai backend '{self.name}': cannot reach the server to learn its "
                    f"tokenizer ({public_url(candidates[0])}: {exc}); start it, or check url "
                    "and tokenize_url"
                ) from None
            if tokenizer is None:
                plan.rule, plan.tokenizer = "characters", {"endpoint": None, "tried": tried}
                check_characters(name_sets, tried=tried, backend_name=self.name)
            else:
                self._tokenizer = tokenizer
                plan.rule, plan.tokenizer = "first_pieces", tokenizer.describe()
                await add_tables(plan, tokenizer, name_sets,
                                 variants=self.options_as == "labels", backend_name=self.name)
        elif self.readout == "sequence":
            plan.echo_check = await self._check_echo()
            candidates = tokenize_candidates(self.url, self.settings.tokenize_url)
            try:
                tokenizer, _tried = await find_tokenizer(self.caller, candidates, self.model)
            except BackendError:
                tokenizer = None
            self._tokenizer = tokenizer
            scorer = None if tokenizer is None else PrefixScorer(self._post, tokenizer)
            probe = self.prompt_text(DecisionRequest("echo-check", self.decision, PROBE_INPUT))
            plan.scoring = await choose_scoring(scorer, probe, plan.echo_check)
        return plan

    async def _plan_for(self, shown: Sequence[str]) -> ReadoutPlan:
        """The plan, covering this presentation. Within a run every presentation is planned
        before the first call; outside one (SDK, replay) the plan is made on first use. A
        presentation the plan does not cover (a minimisation candidate mixing label styles)
        is covered from the same tokenizer, and answered `invalid_response` if its labels
        collide: it must not stop the run."""
        names = self.names(shown)
        async with self._planning:
            if self.plan is None:
                self.plan = await self._make_plan([shown])
                return self.plan
            plan = self.plan
            try:
                if plan.rule == "characters":
                    check_characters([names], tried=(plan.tokenizer or {}).get("tried", {}),
                                     backend_name=self.name)
                elif plan.rule == "first_pieces" and table_key(names) not in plan.tables:
                    variants = self.options_as == "labels"
                    tokenizer = (self._stored_tokenizer()
                                 if plan.missing_forms([names], variants=variants) else None)
                    await add_tables(plan, tokenizer, [names], variants=variants,
                                     backend_name=self.name)
            except ConfigurationError as exc:
                raise InvalidResponse(f"{exc} (a presentation the plan did not cover)") from None
        return plan

    def _stored_tokenizer(self, described: Mapping[str, Any] | None = None) -> Tokenizer:
        """The tokenizer the plan names (`described`, else the plan's first-piece one)."""
        if self._tokenizer is None:
            described = described or (self.plan.tokenizer if self.plan else None)
            assert described is not None and described["endpoint"]
            self._tokenizer = Tokenizer(self.caller, described["endpoint"], self.model,
                                        list(described["special_prefix"]))
        return self._tokenizer

    async def _check_echo(self) -> dict[str, Any]:
        """Check, before the first call, that the server's echo gives each prompt token's
        log probability given the tokens before it: the top candidate after a prompt must
        get, echoed at the prompt's end, the log probability `top_logprobs` gave it.
        llama-cpp-python 0.3.x shifts echoed values by one token when the prompt does not
        start with the model's BOS token, which would make every label score wrong."""
        probe = DecisionRequest("echo-check", self.decision, PROBE_INPUT)
        prompt = self.prompt_text(probe)
        request = {"prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                   "logprobs": ECHO_CHECK_CANDIDATES}
        body = await self._post(request)
        if generated_nothing(body, "completions"):
            body = await self._post({**request, "min_tokens": 1})
        candidates = sorted(top_candidates(body, "completions"), key=lambda c: -c[1])
        where = f"openai backend '{self.name}': readout 'sequence'"
        for token, expected in candidates[:ECHO_CHECK_CANDIDATES]:
            if not token.strip():
                continue
            echo = await self._post({"prompt": prompt + token, "max_tokens": 1,
                                     "temperature": 0.0, "logprobs": 1, "echo": True})
            try:
                echoed = answer_logprob(echo, prompt + token, token)
            except InvalidResponse:
                try:
                    echoed = answer_logprob(echo, prompt + token, token, generated_listed=False)
                except InvalidResponse:
                    continue  # the token merges with the prompt's end; try the next one
            if abs(echoed - expected) > ECHO_CHECK_TOLERANCE:
                raise ConfigurationError(
                    f"{where} reads each label's log probability from the prompt tokens the "
                    f"server echoes, and this server's echo is not aligned: the token "
                    f"{token!r} after the prompt has log probability {expected:.4f} in "
                    f"top_logprobs but {echoed:.4f} in the echo. llama-cpp-python 0.3.x "
                    "shifts echoed values by one token when the prompt does not start with "
                    "the model's BOS token (SmolLM2's is <|im_start|>: start the prompt with "
                    "its chat markup). Use readout: logprobs, or a server whose echo is aligned"
                )
            return {"token": token, "top_logprob": expected, "echo_logprob": echoed}
        raise ConfigurationError(
            f"{where}: could not check the server's echoed log probabilities: none of the "
            f"top {ECHO_CHECK_CANDIDATES} tokens after the prompt came back as a token of its "
            "own (does the server honour echo: true with logprobs?)"
        )

    # -- readouts ------------------------------------------------------------------------------

    async def predict(self, request: DecisionRequest) -> Prediction:
        if self.readout == "sample":
            return await self._sample(request)
        plan = await self._plan_for(request.decision.labels)
        if self.readout == "sequence":
            return await self._sequence(request, plan)
        return await self._logprobs(request, plan)

    def _shown(self, request: DecisionRequest, by_name: Mapping[str, float]) -> dict[str, float]:
        """Values keyed by the readout's names → keyed by the labels as shown."""
        shown = request.decision.labels
        return {label: by_name[name] for label, name in zip(shown, self.names(shown),
                                                             strict=True)}

    def readout_options(self) -> dict[str, Any]:
        """The decoding and log-probability settings of the readout's requests."""
        if self.readout == "logprobs":
            options: dict[str, Any] = {"max_tokens": 1,
                                       "temperature": self.settings.temperature}
            if self.api == "chat":
                options.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
            else:
                options.update(logprobs=TOP_LOGPROBS)
            return options
        if self.readout == "sequence":
            return {"max_tokens": 1, "temperature": 0.0, "logprobs": 1, "echo": True}
        options = {"temperature": self.settings.temperature,
                   "max_tokens": self.settings.max_tokens or SAMPLE_MAX_TOKENS}
        if self.api == "completions":
            options["stop"] = ["\n"]  # a base model goes on writing after its answer
        return options

    async def _logprobs(self, request: DecisionRequest, plan: ReadoutPlan) -> Prediction:
        names = self.names(request.decision.labels)
        options = self.readout_options()
        body = await self._ask(request, **options)
        if generated_nothing(body, self.api):
            body = await self._ask(request, **options, min_tokens=1)
        owner = plan.owner(names, exact=self.options_as == "letters")
        distribution, label_mass = first_token_distribution(
            top_candidates(body, self.api), owner, names
        )
        return Prediction(self._shown(request, distribution), model=self.model,
                          model_version=_served(body), metadata={"label_mass": label_mass})

    async def _sequence(self, request: DecisionRequest, plan: ReadoutPlan) -> Prediction:
        prompt = self.prompt_text(request)
        answers = {name: continuation(prompt, name) for name in self.names(
            request.decision.labels)}
        served: list[str] = []

        async def post(payload: dict[str, Any]) -> dict[str, Any]:
            body = await self._post(payload)
            served.extend(filter(None, [_served(body)]))
            return body

        scoring = plan.scoring or {"method": "echo"}
        # One label (token) at a time: the engine's concurrency bound counts decisions.
        logprobs = (await PrefixScorer(post, self._stored_tokenizer(scoring["tokenizer"]))
                    .score(prompt, answers) if scoring["method"] == "prefix" else {})
        for name, text in answers.items():
            if name not in logprobs:  # echo: the label's tokens merge with the prompt's end
                body = await post({"prompt": prompt + text, **self.readout_options()})
                logprobs[name] = answer_logprob(body, prompt + text, text)
        distribution, label_mass = normalised({name: logprobs[name] for name in answers})
        return Prediction(self._shown(request, distribution), model=self.model,
                          model_version=served[-1] if served else None,
                          metadata={"label_mass": label_mass})

    async def _sample(self, request: DecisionRequest) -> Prediction:
        shown = request.decision.labels
        names = self.names(shown)
        samples: int = self.settings.samples
        counts: Counter[str] = Counter()
        served = None
        options = self.readout_options()
        # One request at a time: the engine's concurrency bound counts decisions, and
        # parallel samples would multiply the load it allows.
        for _ in range(samples):
            body = await self._ask(request, **options)
            served = _served(body) or served
            answer = self._answer_text(body)
            if answer is None:
                continue
            name = (parse_code(answer, names) if self.options_as == "letters"
                    else parse_answer(answer, names))
            if name is not None:
                counts[name] += 1
        parsed = sum(counts.values())
        if not parsed:
            raise InvalidResponse(f"none of the {samples} sampled answers names one option")
        return Prediction(
            self._shown(request, {name: counts[name] / parsed for name in names}),
            model=self.model,
            model_version=served,
            metadata={"samples": samples, "parsed": parsed, "unparseable": samples - parsed},
        )

    def _answer_text(self, body: dict[str, Any]) -> str | None:
        if self.api == "completions":
            text = path(body, "choices", 0, "text")
            return text if isinstance(text, str) else None
        message = path(body, "choices", 0, "message")
        if not isinstance(message, dict):
            raise InvalidResponse("response has no choices[0].message object")
        content = message.get("content")
        return content if isinstance(content, str) else None

    # -- the call cache's keys -----------------------------------------------------------------

    def call_identity(self) -> dict[str, Any]:
        # no static headers: the only header it adds is the key from the environment
        return {"provider": self.provider, "url": public_url(self.url), "model": self.model,
                "sent_to": sent_to(self.endpoint, {}), "api": self.api, "readout": self.readout,
                "options_as": self.options_as}

    def request_sent(self, request: DecisionRequest) -> Any:
        """The prompt (or messages) as sent, the labels as shown and the names read out,
        the readout's settings, and how its answer is read: the first-piece table of this
        presentation (`logprobs`) or the number of samples (`sample`)."""
        shown = request.decision.labels
        names = self.names(shown)
        sent: dict[str, Any] = (
            {"messages": self.messages(request)} if self.api == "chat"
            else {"prompt": self.prompt_text(request)})
        sent.update(labels=list(shown), names=list(names), options=self.readout_options())
        if self.readout == "sample":
            sent["samples"] = self.settings.samples
        if self.plan is not None and self.plan.scoring is not None:
            sent["scoring"] = self.plan.scoring["method"]
        if self.plan is not None and self.plan.rule is not None:
            sent["rule"] = self.plan.rule
            table = self.plan.tables.get(table_key(names))
            if table is not None:
                sent["table"] = table.to_json()
        return sent

    async def model_identity(self) -> ModelIdentity:
        """`GET <url>/models`, and llama.cpp's `GET /props` (its build) when the list comes
        from llama.cpp's own server; a server that answers neither has an unverified
        identity (the configured name alone)."""
        try:
            models = json_object(await self.caller.get(f"{self.url}/models"))
        except BackendError as exc:
            return ModelIdentity({}, False, f"unverified: {public_url(self.url)}/models did "
                                 f"not say which model is served ({exc})")
        props = None
        if is_llama_cpp(models):
            try:
                props = json_object(await self.caller.get(f"{origin_url(self.url)}/props"))
            except BackendError:
                props = None
        return served_identity(models, self.model, props)

    # -- lifecycle -----------------------------------------------------------------------------

    async def healthcheck(self) -> Health:
        return await self.caller.health(self.health_url)

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "url": public_url(self.url),
            "protocol": "openai.chat.completions" if self.api == "chat" else "openai.completions",
            "api": self.api,
            "readout": self.readout,
            "options_as": self.options_as,
            "served_models": sorted(self.served_models),
        }
        if self.plan is not None:
            plan = self.plan.to_json()
            details.update({k: v for k, v in plan.items() if k not in details})
        return details

    async def aclose(self) -> None:
        await self.caller.aclose()


def _served(body: dict[str, Any]) -> str | None:
    served = body.get("model")
    return served if isinstance(served, str) and served else None
