"""Counterfactual persona pairs: seeded, single-axis, with within-group placebo partners.

For every axis a pool of ``pool_size_per_dimension`` catalogue entries is drawn once per run
from a SHA-256 stream keyed by (catalog_seed, language, axis, catalogue hash), so the same
contract and catalogue always probe the same personas, on every machine. Each case gets a
base persona (its context for every axis), then per axis ``num_pairs_per_dimension`` cross
pairs of two *distinct* groups that share the context the axis must hold fixed (an
ethnicity pair keeps the gender, a gender pair keeps the ethnicity and surname), oriented at
random. Each cross pair gets a placebo partner: arm A against another entry of the *same*
group, which changes a comparable amount of text but no group — the noise floor a flip has
to clear before it is attributed to the axis. Arm A is shared by both, so the placebo costs
one extra call, not two.

Every pair is rendered and diffed: arms that render identically are ``identical`` (the axis
was not exercised on that case, e.g. a text whose slots do not include the axis), and a pair
whose diff reaches another axis's slots is ``multi-axis`` and kept apart.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import polars as pl

from decflow.catalogue.entries import AXES, Catalogue, Entry, Persona, load_catalogue
from decflow.catalogue.templates import unknown_slots
from decflow.diagnostics.render import (
    Rendered,
    RenderError,
    changed_slots,
    off_axis_slots,
    render_input,
)
from decflow.errors import ConfigurationError
from decflow.properties.stream import Stream

PairKind = Literal["cross", "placebo"]
PairStatus = Literal["ok", "identical", "multi-axis"]

# Whether a placebo partner must share the cross pair's fixed context. A religion placebo
# deliberately uses another frame (a different wording of the same affiliation).
_PLACEBO_SAME_CELL = {"gender": True, "ethnicity": True, "religion": False, "role": True}


@dataclass(frozen=True)
class PersonaPair:
    axis: str
    pair_id: str  # `<axis>/<case id>/<k>`; a cross pair and its placebo share it
    case_id: str
    kind: PairKind
    input_a: str | dict[str, Any]
    input_b: str | dict[str, Any]
    group_a: str
    group_b: str
    entry_a: str
    entry_b: str
    status: PairStatus
    changed: tuple[str, ...]  # slots the rendered arms differ in
    fingerprint_a: str  # sha256 of the canonical JSON of the arm's input
    fingerprint_b: str


@dataclass
class PairSet:
    language: str
    catalogue_version: str
    catalogue_sha256: str
    template: str
    pairs: list[PersonaPair] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {case_id, reason}
    not_exercised: dict[str, str] = field(default_factory=dict)  # axis → reason
    pools: dict[str, list[str]] = field(default_factory=dict)  # axis → entry ids
    # case id → (fingerprint, input) of the case with its base persona: the decisions that
    # blindness guarding the persona verdicts is measured on.
    bases: dict[str, tuple[str, str | dict[str, Any]]] = field(default_factory=dict)

    def frame(self) -> pl.DataFrame:
        """One row per pair; inputs as JSON text (a string input is a JSON string)."""
        rows = [
            {
                "axis": p.axis,
                "pair_id": p.pair_id,
                "case_id": p.case_id,
                "kind": p.kind,
                "group_a": p.group_a,
                "group_b": p.group_b,
                "entry_a": p.entry_a,
                "entry_b": p.entry_b,
                "status": p.status,
                "changed": list(p.changed),
                "fingerprint_a": p.fingerprint_a,
                "fingerprint_b": p.fingerprint_b,
                "input_a": _canonical(p.input_a),
                "input_b": _canonical(p.input_b),
            }
            for p in self.pairs
        ]
        return pl.DataFrame(rows, schema=PAIR_SCHEMA)

    def pair_arms(self) -> dict[str, str | dict[str, Any]]:
        """Each distinct arm input of the pairs once, keyed by fingerprint, in first-use order.

        Arms shared between a cross pair and its placebo partner (or repeated across pairs)
        are decided once; the results come back through ``attach_probabilities``.
        """
        arms: dict[str, str | dict[str, Any]] = {}
        for p in self.pairs:
            if p.status == "identical":
                continue  # nothing to ask: the pair is skipped
            arms.setdefault(p.fingerprint_a, p.input_a)
            arms.setdefault(p.fingerprint_b, p.input_b)
        return arms

    def unique_arms(self) -> dict[str, str | dict[str, Any]]:
        """Every input to decide: the pair arms, then the base-persona inputs not among them."""
        arms = self.pair_arms()
        if any(p.status != "identical" for p in self.pairs):
            for fp, value in self.bases.values():
                arms.setdefault(fp, value)
        return arms

    def arm_cases(self) -> dict[str, str]:
        """Fingerprint → the first case that uses the arm (base arms belong to their case)."""
        case_of: dict[str, str] = {}
        for pair in self.pairs:
            case_of.setdefault(pair.fingerprint_a, pair.case_id)
            case_of.setdefault(pair.fingerprint_b, pair.case_id)
        for case_id, (fp, _) in self.bases.items():
            case_of.setdefault(fp, case_id)
        return case_of


PAIR_SCHEMA = pl.Schema({
    "axis": pl.String(),
    "pair_id": pl.String(),
    "case_id": pl.String(),
    "kind": pl.String(),
    "group_a": pl.String(),
    "group_b": pl.String(),
    "entry_a": pl.String(),
    "entry_b": pl.String(),
    "status": pl.String(),
    "changed": pl.List(pl.String()),
    "fingerprint_a": pl.String(),
    "fingerprint_b": pl.String(),
    "input_a": pl.String(),
    "input_b": pl.String(),
})


def _canonical(value: str | Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def fingerprint(value: str | Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(value).encode()).hexdigest()


def _stream(seed: int, cat: Catalogue, purpose: str, *context: str) -> Stream:
    return Stream(
        seed, f"counterfactual.{purpose}", "\x1f".join((cat.language, cat.sha256, *context))
    )


def draw_pools(cat: Catalogue, catalog_seed: int, pool_size: int) -> dict[str, list[Entry]]:
    """Per axis, ``pool_size`` entries drawn from the catalogue's id-sorted entries."""
    return {
        axis: _stream(catalog_seed, cat, f"{axis}.pool").sample(
            cat.entries[axis], min(pool_size, len(cat.entries[axis]))
        )
        for axis in AXES
    }


def base_persona(
    cat: Catalogue, pools: Mapping[str, list[Entry]], catalog_seed: int, case_id: str
) -> Persona:
    """The case's shared context: a name, a religion clause and an occupation from the pools."""
    stream = _stream(catalog_seed, cat, "base", case_id)
    fields: dict[str, Any] = {}
    for axis in ("ethnicity", "religion", "role"):
        pool = pools[axis]
        fields.update(pool[stream.draw(len(pool))].values)
    return Persona(**fields)


def _cell_of(axis: str, persona: Persona) -> str:
    return {
        "gender": persona.ethnicity,
        "ethnicity": persona.gender,
        "religion": str(persona.frame),
        "role": "",
    }[axis]


def _grouped(pool: Sequence[Entry]) -> dict[str, dict[str, list[Entry]]]:
    cells: dict[str, dict[str, list[Entry]]] = {}
    for entry in pool:
        cells.setdefault(entry.cell, {}).setdefault(entry.group, []).append(entry)
    return cells


def _eligible_cells(pool: Sequence[Entry]) -> list[str]:
    return sorted(cell for cell, groups in _grouped(pool).items() if len(groups) >= 2)


def _cross_entries(
    pool: Sequence[Entry], cells: Sequence[str], count: int, stream: Stream
) -> list[tuple[str, Entry, Entry]]:
    """Up to ``count`` distinct (cell, x, y) pairs of two different groups within a cell.

    Cells are used in the given order of preference; inside a cell the group pairs are
    visited in a seeded order, round robin, so every contrast gets its turn before any
    repeats with other names.
    """
    grouped = _grouped(pool)
    chosen: list[tuple[str, Entry, Entry]] = []
    for cell in cells:
        groups = grouped[cell]
        combos = list(itertools.combinations(sorted(groups), 2))
        order = stream.sample(combos, len(combos))
        remaining = {gp: [(x, y) for x in groups[gp[0]] for y in groups[gp[1]]] for gp in order}
        for gp in itertools.cycle(order):
            if len(chosen) == count or not any(remaining.values()):
                break
            options = remaining[gp]
            if not options:
                continue
            x, y = options.pop(stream.draw(len(options)))
            chosen.append((cell, y, x) if stream.draw(2) else (cell, x, y))
        if len(chosen) == count:
            break
    return chosen


def _placebo_entry(pool: Sequence[Entry], axis: str, anchor: Entry, stream: Stream) -> Entry | None:
    same_cell = _PLACEBO_SAME_CELL[axis]
    options = [
        e
        for e in pool
        if e.group == anchor.group
        and e.id != anchor.id
        and (not same_cell or e.cell == anchor.cell)
    ]
    return options[stream.draw(len(options))] if options else None


@dataclass(frozen=True)
class _Arm:
    rendered: Rendered
    slots: dict[str, str]


class _Builder:
    def __init__(self, cat: Catalogue, template: str, text_field: str | None, out: PairSet) -> None:
        self.cat = cat
        self.template = template
        self.text_field = text_field
        self.out = out

    def arm(self, value: str | Mapping[str, Any], slots: dict[str, str]) -> _Arm:
        return _Arm(render_input(value, slots, self.template, self.cat, self.text_field), slots)

    def add(
        self,
        axis: str,
        pair_id: str,
        case_id: str,
        kind: PairKind,
        a: _Arm,
        b: _Arm,
        groups: tuple[str, str],
        entries: tuple[str, str],
    ) -> None:
        touched = changed_slots(a.rendered, b.rendered)
        status: PairStatus = "identical" if touched is None else "ok"
        if touched is not None and off_axis_slots(axis, touched, a.slots, b.slots, self.cat):
            status = "multi-axis"
        self.out.pairs.append(
            PersonaPair(
                axis=axis,
                pair_id=pair_id,
                case_id=case_id,
                kind=kind,
                input_a=a.rendered.value,
                input_b=b.rendered.value,
                group_a=groups[0],
                group_b=groups[1],
                entry_a=entries[0],
                entry_b=entries[1],
                status=status,
                changed=tuple(sorted(touched or ())),
                fingerprint_a=fingerprint(a.rendered.value),
                fingerprint_b=fingerprint(b.rendered.value),
            )
        )


def _catalogue_pairs(
    builder: _Builder,
    axis: str,
    case_id: str,
    value: str | Mapping[str, Any],
    base: Persona,
    pool: Sequence[Entry],
    seed: int,
    count: int,
    placebo: bool,
) -> None:
    cat = builder.cat
    stream = _stream(seed, cat, axis, case_id)
    eligible = _eligible_cells(pool)
    base_cell = _cell_of(axis, base)
    # The base persona's own context first, then the other cells in a seeded order.
    others = [c for c in eligible if c != base_cell]
    cells = ([base_cell] if base_cell in eligible else []) + stream.sample(others, len(others))
    contexts: dict[str, Persona] = {}

    def context_for(cell: str) -> Persona:
        if cell not in contexts:
            contexts[cell] = base
            if axis == "gender" and cell != base.ethnicity:
                # A gender pair keeps one surname; outside the base ethnicity draw it from
                # the pair's own cell.
                index = stream.draw(len(cat.last_names[cell]))
                contexts[cell] = replace(base, last_index=index)
        return contexts[cell]

    def persona_arm(cell: str, entry: Entry) -> _Arm:
        slots = cat.slots(replace(context_for(cell), **dict(entry.values)))
        return builder.arm(value, slots)

    for k, (cell, x, y) in enumerate(_cross_entries(pool, cells, count, stream)):
        pair_id = f"{axis}/{case_id}/{k}"
        arm_x = persona_arm(cell, x)
        builder.add(
            axis,
            pair_id,
            case_id,
            "cross",
            arm_x,
            persona_arm(cell, y),
            (x.group, y.group),
            (x.id, y.id),
        )
        if not placebo:
            continue
        anchor, partner = x, _placebo_entry(pool, axis, x, stream)
        if partner is None:
            anchor, partner = y, _placebo_entry(pool, axis, y, stream)
        if partner is not None:
            anchor_arm = arm_x if anchor is x else persona_arm(cell, anchor)
            builder.add(
                axis,
                pair_id,
                case_id,
                "placebo",
                anchor_arm,
                persona_arm(cell, partner),
                (anchor.group, partner.group),
                (anchor.id, partner.id),
            )


def _custom_slots(
    cat: Catalogue, base_slots: Mapping[str, str], given: Mapping[str, str], where: str
) -> dict[str, str]:
    unknown = sorted(set(given) - set(cat.slot_names))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown persona slots {unknown} for language {cat.language!r}; "
            f"use {sorted(s for s in cat.slot_names if not s.endswith('_cap'))}"
        )
    slots = dict(base_slots) | dict(given)
    if "full_name" not in given and {"first_name", "last_name"} & set(given):
        slots["full_name"] = f"{slots['first_name']} {slots['last_name']}"
    for name in list(slots):
        if not name.endswith("_cap") and f"{name}_cap" not in given:
            slots[f"{name}_cap"] = slots[name][:1].upper() + slots[name][1:]
    return slots


def _pair_fields(pair: Any) -> tuple[str, Mapping[str, str], Mapping[str, str]]:
    """A `persona_pairs` item as a mapping or as the contract model."""
    if isinstance(pair, Mapping):
        return pair["axis"], pair["a"], pair["b"]
    return pair.axis, pair.a, pair.b


def build_pairs(
    cases: Sequence[tuple[str, str | Mapping[str, Any]]],
    *,
    dimensions: Sequence[str] = AXES,
    language: str = "en",
    catalog_seed: int = 42,
    num_pairs_per_dimension: int = 4,
    pool_size_per_dimension: int = 16,
    persona_pairs: Sequence[Any] | None = None,
    placebo: bool = True,
    template: str | None = None,
    text_field: str | None = None,
) -> PairSet:
    """Persona pairs for every (case, axis), in case order then ``dimensions`` order.

    ``cases`` are (case id, input) in dataset order; ``template`` None means the catalogue's
    default for the language. ``persona_pairs`` replaces the catalogue: each item
    ``{axis, a: {slot: value}, b: {slot: value}}`` is applied to every case on top of the
    case's base persona, and still diff-checked; it has no placebo partner.
    """
    cat = load_catalogue(language)
    chosen_template = cat.default_template if template is None else template
    unknown = unknown_slots(chosen_template, cat)
    if unknown:
        raise ConfigurationError(
            f"properties.counterfactual.template: slots {unknown} are not in the {language} "
            f"persona catalogue; use {sorted(s for s in cat.slot_names if not s.endswith('_cap'))}"
        )
    out = PairSet(cat.language, cat.version, cat.sha256, chosen_template)
    pools = draw_pools(cat, catalog_seed, pool_size_per_dimension)
    out.pools = {axis: [e.id for e in pools[axis]] for axis in AXES}
    custom = [_pair_fields(p) for p in persona_pairs] if persona_pairs is not None else None
    for axis in dimensions:
        if custom is not None:
            if not any(a == axis for a, _, _ in custom):
                out.not_exercised[axis] = "persona_pairs gives no pair for this axis"
        elif not _eligible_cells(pools[axis]):
            out.not_exercised[axis] = (
                f"the pool of {len(pools[axis])} entries holds fewer than two groups that "
                "can be contrasted; raise pool_size_per_dimension"
            )
    builder = _Builder(cat, chosen_template, text_field, out)
    for case_id, value in cases:
        base = base_persona(cat, pools, catalog_seed, case_id)
        try:
            base_arm = builder.arm(value, cat.slots(base))
        except RenderError as exc:
            out.skipped.append({"case_id": case_id, "reason": str(exc)})
            continue
        out.bases[case_id] = (fingerprint(base_arm.rendered.value), base_arm.rendered.value)
        for axis in dimensions:
            if axis in out.not_exercised:
                continue
            if custom is None:
                _catalogue_pairs(
                    builder,
                    axis,
                    case_id,
                    value,
                    base,
                    pools[axis],
                    catalog_seed,
                    num_pairs_per_dimension,
                    placebo,
                )
                continue
            mine = [(i, a, b) for i, (ax, a, b) in enumerate(custom) if ax == axis]
            for k, (i, a, b) in enumerate(mine):
                where = f"properties.counterfactual.persona_pairs[{i}]"
                arm_a = builder.arm(value, _custom_slots(cat, base_arm.slots, a, where))
                arm_b = builder.arm(value, _custom_slots(cat, base_arm.slots, b, where))
                builder.add(
                    axis,
                    f"{axis}/{case_id}/{k}",
                    case_id,
                    "cross",
                    arm_a,
                    arm_b,
                    ("a", "b"),
                    (f"{where}.a", f"{where}.b"),
                )
    return out
