"""Derived requests: everything sent besides the originals, in the `transformed` phase.

- transformed cases of every enabled property (fuzz / all modes). Each property derives its
  transformations per (seed, property, case id) independently, so the same contract,
  dataset and seed always give the same requests. Cases a property cannot transform are
  recorded as skipped with the reference's reason; provider failures become requests that
  carry their error and are never sent.
- stability reruns (all / stability modes, `diagnostics.stability`): k − 1 more calls per
  case with the unchanged input and canonical labels (property "stability", samples
  1..k−1); the original is the series' first draw, so the meter costs n·(k − 1) calls.
- counterfactual persona arms (fuzz / all, `properties.counterfactual`): one request per
  distinct rendered arm (property "counterfactual", id `counterfactual/<sha256 of the
  arm>`), so an arm shared by a cross pair and its placebo partner is decided once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import repeat
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.contracts.properties import Counterfactual, Paraphrase
from decflow.contracts.sections import Stability
from decflow.data.golden_dataset import case_input, compact_json
from decflow.errors import DecflowError
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.pipeline.spec import RunSpec, load_contract_cached

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.properties import PropertyConfig
    from decflow.diagnostics.personas import PairSet
    from decflow.properties.base import Transformed

RERUN = "stability"
COUNTERFACTUAL = "counterfactual"
# The artifact holding a run's persona pairs (named in the requests manifest's extra).
PERSONA_PAIRS = "persona_pairs"
# Request properties that are diagnostics, judged in the summary's diagnostics section and
# never by the generic property comparisons.
DIAGNOSTIC_PROPERTIES = (RERUN, COUNTERFACTUAL)
# Rows per requests part: bounds the Python lists the requests stage holds at once. Every
# reader of the requests pays a fixed ~1.3 ms per part it decodes (8 readers at 10k cases:
# 8,192-row parts cost ~0.1 s of decoding overhead), so parts are not made smaller.
PART_ROWS = 16_384


def _steps_encoder() -> Callable[[Any], str]:
    """`json.JSONEncoder(ensure_ascii=False).encode` for step lists (plain JSON by
    construction), without building the C encoder again for each of a run's ~10⁵ lists."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(ensure_ascii=False).encode
    chunks = make(None, json.JSONEncoder().default, json.encoder.encode_basestring, None,
                  ": ", ", ", False, False, True)
    return lambda steps: "".join(chunks(steps, 0))


_dump_steps = _steps_encoder()


def _enabled(spec: RunSpec, contract: Contract) -> list[tuple[str, PropertyConfig]]:
    """Enabled properties in the fixed order, narrowed by `-p` (which must name enabled ones)."""
    enabled = contract.properties.enabled()
    if spec.properties is not None:
        names = {name for name, _ in enabled}
        unknown = [p for p in spec.properties if p not in names]
        if unknown:
            listed = ", ".join(sorted(names)) or "none"
            raise DecflowError(
                f"property '{unknown[0]}' is not enabled in the contract (enabled: {listed})"
            )
        enabled = [(n, c) for n, c in enabled if n in spec.properties]
    return enabled


def selected_properties(spec: RunSpec, contract: Contract) -> list[tuple[str, PropertyConfig]]:
    """The metamorphic properties of this run (`counterfactual` is a diagnostic of its own).

    A fuzz run needs something to fuzz; `test --all` may also be diagnostics only.
    """
    enabled = _enabled(spec, contract)
    if not enabled and (spec.run_mode.needs_a_property or contract.diagnostics is None):
        raise DecflowError("no property is enabled; add one under 'properties' in the contract")
    return [(name, config) for name, config in enabled if name != COUNTERFACTUAL]


def counterfactual_config(spec: RunSpec, contract: Contract) -> Counterfactual | None:
    """`properties.counterfactual` when this run decides persona arms."""
    if not spec.run_mode.fills("properties"):
        return None
    config = dict(_enabled(spec, contract)).get(COUNTERFACTUAL)  # also checks `-p`
    return config if isinstance(config, Counterfactual) else None


def stability_config(spec: RunSpec, contract: Contract) -> Stability | None:
    """`diagnostics.stability` when this run makes reruns; `decflow stability` runs the meter
    with the defaults when the contract has no section, and with `spec.repeats` draws per
    case when the spec sets them (a diff's noise reruns)."""
    mode = spec.run_mode
    if not mode.reruns:
        return None
    configured = contract.diagnostics.stability if contract.diagnostics is not None else None
    if configured is None and mode.meter_by_default:
        configured = Stability()
    if configured is not None and spec.repeats is not None and mode.meter_by_default:
        return configured.model_copy(update={"repeats": spec.repeats})
    return configured


def persona_settings(contract: Contract, config: Counterfactual) -> dict[str, Any]:
    """The settings that decide which persona pairs a run draws (stored with the pairs, so
    a re-gate with other settings knows the run's arms are not the ones it asks for)."""
    drawn = config.model_dump(include={
        "dimensions", "language", "catalog_seed", "num_pairs_per_dimension",
        "pool_size_per_dimension", "persona_pairs", "placebo", "template",
    })
    return {**drawn, "text_field": contract.fuzz.text_field}


def persona_pair_set(contract: Contract, config: Counterfactual, cases: pl.DataFrame) -> PairSet:
    """The persona pairs of a contract's cases (a pure function of both): drawn once by the
    requests stage, which stores them for the summary (`inputs.py`)."""
    from decflow.diagnostics.personas import build_pairs

    inputs = [
        (case_id, case_input(text, obj))
        for case_id, text, obj in zip(
            cases["case_id"], cases["input_text"], cases["input_json"], strict=True
        )
    ]
    return build_pairs(
        inputs,
        dimensions=config.dimensions,
        language=config.language,
        catalog_seed=config.catalog_seed,
        num_pairs_per_dimension=config.num_pairs_per_dimension,
        pool_size_per_dimension=config.pool_size_per_dimension,
        persona_pairs=config.persona_pairs,
        placebo=config.placebo,
        template=config.template,
        text_field=contract.fuzz.text_field,
    )


def arm_request_id(fingerprint: str) -> str:
    return f"{COUNTERFACTUAL}/{fingerprint.removeprefix('sha256:')}"


def arm_fingerprint(request_id: str) -> str:
    return "sha256:" + request_id.removeprefix(f"{COUNTERFACTUAL}/")


def _canonical_presentation(n: int, labels: tuple[str, ...]) -> dict[str, pl.Series]:
    return {
        "shown_labels": pl.Series([list(labels)] * n, dtype=pl.List(pl.String)),
        "label_order": pl.Series([list(range(len(labels)))] * n, dtype=pl.List(pl.Int64)),
    }


def rerun_requests(cases: pl.DataFrame, labels: tuple[str, ...], repeats: int) -> pl.DataFrame:
    """Samples 1..repeats−1 of every case, unchanged, with the canonical labels."""
    samples = pl.DataFrame({"sample": list(range(1, repeats))}, schema={"sample": pl.Int64})
    table = cases.select("case_id", "input_text", "input_json").join(samples, how="cross")
    return table.with_columns(
        request_id=pl.format("{}/{}/{}", pl.lit(RERUN), "case_id", "sample"),
        property=pl.lit(RERUN),
        steps_json=pl.lit(None, dtype=pl.String),
        pre_error_kind=pl.lit(None, dtype=pl.String),
        pre_error_message=pl.lit(None, dtype=pl.String),
        **_canonical_presentation(table.height, labels),
    ).select(list(REQUESTS_SCHEMA)).cast(REQUESTS_SCHEMA)


def counterfactual_requests(pairs: PairSet, labels: tuple[str, ...]) -> pl.DataFrame:
    """One request per distinct persona arm, attributed to the first case that uses it."""
    arms = pairs.unique_arms()
    case_of = pairs.arm_cases()
    values = list(arms.values())
    n = len(arms)
    return pl.DataFrame(
        {
            "request_id": [arm_request_id(fp) for fp in arms],
            "case_id": [case_of[fp] for fp in arms],
            "property": [COUNTERFACTUAL] * n,
            "sample": [0] * n,
            "input_text": [v if isinstance(v, str) else None for v in values],
            "input_json": [None if isinstance(v, str) else compact_json(v) for v in values],
            **_canonical_presentation(n, labels),
            "steps_json": [None] * n,
            "pre_error_kind": [None] * n,
            "pre_error_message": [None] * n,
        },
        schema=REQUESTS_SCHEMA,
    )


def run_seed(spec: RunSpec, contract: Contract) -> int:
    return spec.seed if spec.seed is not None else contract.fuzz.seed


def derived_requests(
    spec: RunSpec, loaded: LoadedContract, cases: pl.DataFrame, pairs: PairSet | None
) -> tuple[Iterator[pl.DataFrame], dict[str, Any]]:
    """Transformed requests, reruns and the arms of `pairs` (the run's persona pairs, when
    it decides them) as frames in stored order,
    plus the requests manifest's extra (skipped cases, provenance), which is complete once the
    frames are consumed. Frames are generated lazily, at most `PART_ROWS` rows each, so the
    stage never holds every transformed request in Python lists."""
    extra: dict[str, Any] = {"skipped": [], "provenance": {}}
    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    # Resolved now, so a bad `-p` fails before any part is written.
    properties = (
        selected_properties(spec, contract) if spec.run_mode.fills("properties") else []
    )
    stability = stability_config(spec, contract)

    def frames() -> Iterator[pl.DataFrame]:
        if properties:
            yield from _property_requests(spec, loaded, cases, properties, extra)
        if stability is not None:
            yield rerun_requests(cases, labels, stability.repeats)
        if pairs is not None:
            yield counterfactual_requests(pairs, labels)

    return frames(), extra


def _property_requests(
    spec: RunSpec,
    loaded: LoadedContract,
    cases: pl.DataFrame,
    properties: list[tuple[str, PropertyConfig]],
    extra: dict[str, Any],
) -> Iterator[pl.DataFrame]:
    from decflow.properties.generate import generator
    from decflow.properties.paraphrasers import build_paraphraser

    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    seed = run_seed(spec, contract)
    text_field = contract.fuzz.text_field
    decision_type = contract.decision.type
    inputs = [
        (case_id, case_input(text, obj))
        for case_id, text, obj in zip(
            cases["case_id"], cases["input_text"], cases["input_json"], strict=True
        )
    ]
    skipped = extra["skipped"]
    for name, config in properties:
        paraphraser = (
            build_paraphraser(config.source, base_dir=loaded.base_dir, seed=seed,
                              allowed=spec.allow_paths, contract=str(loaded.path))
            if isinstance(config, Paraphrase) else None
        )
        rows = _RequestRows(name, labels)
        generate = generator(name, config, seed=seed, labels=labels,
                             decision_type=decision_type, text_field=text_field,
                             paraphraser=paraphraser)
        # ~6·10⁴ iterations a 10k run: the common case (transformed cases, no provenance)
        # takes one test, and the part size is counted here instead of through len(rows).
        provenance: dict[str, Any] = {}
        count = 0
        try:
            for case_id, value in inputs:
                generated = generate(case_id, value)
                transformed = generated.transformed
                if generated.provenance:
                    provenance[case_id] = generated.provenance
                if transformed:
                    rows.add(case_id, transformed)
                    count += len(transformed)
                elif generated.failure is not None:
                    rows.add_failure(case_id, value, generated.failure)
                    count += 1
                elif generated.skip_reason is not None:
                    skipped.append(
                        {"property": name, "case_id": case_id, "reason": generated.skip_reason}
                    )
                if count >= PART_ROWS:
                    yield rows.frame()
                    rows = _RequestRows(name, labels)
                    count = 0
        finally:
            if provenance:
                extra["provenance"][name] = provenance
            if paraphraser is not None:
                paraphraser.close()
        if len(rows):
            yield rows.frame()


# The columns `_RequestRows` builds from Python lists (the labels are joined in by number).
_ROW_SCHEMA = {"case_id": pl.String, "sample": pl.Int64, "input_text": pl.String,
               "input_json": pl.String, "presentation_id": pl.Int64, "steps_json": pl.String,
               "pre_error_kind": pl.String, "pre_error_message": pl.String}


class _RequestRows:
    """Accumulates the transformed requests of one property column by column.

    Presentations repeat across cases (a handful of label orders and formats, handed out as
    shared objects by the generators), so rows carry a presentation number and the label
    lists are joined in once per frame; shared step lists are serialised once.
    """

    def __init__(self, prop: str, labels: tuple[str, ...]) -> None:
        from decflow.properties.generate import transformation

        self.prop = prop
        self.labels = labels
        self.index_of = {label: i for i, label in enumerate(labels)}
        self.presentations: dict[tuple[tuple[str, str], ...] | None, int] = {None: 0}
        # id → (the object, its number or JSON): the reference keeps the id from being reused.
        self.presentation_memo: dict[int, tuple[Any, int]] = {}
        self.steps_memo: dict[int, tuple[list[dict[str, Any]], str]] = {}
        self.step_memo: dict[int, tuple[dict[str, Any], str]] = {}
        self.shared_steps = transformation(prop).shared_steps
        # The rows as generated; `frame` turns them into columns (one pass per column).
        self.case_id: list[str] = []
        self.items: list[Transformed] = []
        self.errors: list[tuple[int, str, str]] = []

    def __len__(self) -> int:
        return len(self.case_id)

    def add(self, case_id: str, items: list[Transformed]) -> None:
        self.case_id += repeat(case_id, len(items))
        self.items += items

    def add_failure(self, case_id: str, value: Any, failure: Any) -> None:
        """A case whose generation failed: one request carrying the error, never sent."""
        # (imported here: a run without properties never loads the transformations' code)
        from decflow.properties.base import Transformed

        self.errors.append((len(self), failure.kind, failure.message))
        self.add(case_id, [Transformed(0, [], value, None)])

    def _presentation_number(self, presentation: list[tuple[str, str]]) -> int:
        found = self.presentation_memo.get(id(presentation))
        if found is not None:
            return found[1]
        key = tuple(map(tuple, presentation))
        number = self.presentations.get(key)  # type: ignore[arg-type]
        if number is None:
            number = self.presentations[key] = len(self.presentations)  # type: ignore[index]
        self.presentation_memo[id(presentation)] = (presentation, number)
        return number

    def _steps_json(self, steps: list[dict[str, Any]]) -> str:
        if not self.shared_steps:
            return _dump_steps(steps)
        found = self.steps_memo.get(id(steps))
        if found is None:
            # `_dump_steps` of the list, from its step dicts' JSON (each encoded once)
            encoded = "[" + ", ".join([self._step_json(step) for step in steps]) + "]"
            found = self.steps_memo[id(steps)] = (steps, encoded)
        return found[1]

    def _step_json(self, step: dict[str, Any]) -> str:
        found = self.step_memo.get(id(step))
        if found is None:
            found = self.step_memo[id(step)] = (step, _dump_steps(step))
        return found[1]

    def frame(self) -> pl.DataFrame:
        items = self.items
        n = len(items)
        inputs = [item.input for item in items]
        # Columns with no value at all (no errors; no object inputs) are made by polars, not
        # from lists of None it would scan and convert.
        columns: dict[str, list[Any]] = {}
        if self.errors:
            kinds: list[str | None] = [None] * n
            messages: list[str | None] = [None] * n
            for index, kind, message in self.errors:
                kinds[index], messages[index] = kind, message
            columns.update(pre_error_kind=kinds, pre_error_message=messages)
        if any(not isinstance(v, str) for v in inputs):
            columns.update(
                input_text=[v if isinstance(v, str) else None for v in inputs],
                input_json=[None if isinstance(v, str) else compact_json(v) for v in inputs],
            )
        else:
            columns["input_text"] = inputs
        number_of = self._presentation_number
        # numbered first: the presentation table below lists every number handed out
        presentation_id = [
            0 if item.presentation is None else number_of(item.presentation) for item in items
        ]
        steps_of = self._steps_json
        shown, order = [], []
        for key in self.presentations:
            if key is None:
                shown.append(list(self.labels))
                order.append(list(range(len(self.labels))))
            else:
                shown.append([s for s, _ in key])
                order.append([self.index_of[label] for _, label in key])
        table = pl.DataFrame(
            {"presentation_id": list(self.presentations.values()), "shown_labels": shown,
             "label_order": order},
            schema={"presentation_id": pl.Int64, "shown_labels": pl.List(pl.String),
                    "label_order": pl.List(pl.Int64)},
        )
        columns.update(
            case_id=self.case_id,
            sample=[item.sample for item in items],
            presentation_id=presentation_id,
            steps_json=[steps_of(item.steps) for item in items],
        )
        rows = pl.DataFrame(columns, schema={name: _ROW_SCHEMA[name] for name in columns})
        joined = rows.join(table, on="presentation_id", how="left", maintain_order="left")
        missing = [pl.lit(None, dtype=pl.String).alias(name)
                   for name in _ROW_SCHEMA if name not in columns]
        return joined.with_columns(
            *missing,
            request_id=pl.format("{}/{}/{}", pl.lit(self.prop), "case_id", "sample"),
            property=pl.lit(self.prop, dtype=pl.String),
        ).select(list(REQUESTS_SCHEMA)).cast(REQUESTS_SCHEMA)


def makes_diagnostic_calls(spec: RunSpec) -> bool:
    """Whether the run sends reruns or persona arms (decided from the contract alone, so a
    run without them does not read its dataset twice)."""
    contract = load_contract_cached(spec.contract_path).contract
    return (
        stability_config(spec, contract) is not None
        or counterfactual_config(spec, contract) is not None
    )
