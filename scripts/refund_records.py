"""Generate days of partitioned production records of the refund decision, with labels that
arrive later, and a planted confidence shift or harmful shift on request.

usage: python scripts/refund_records.py OUT [--start 2026-11-01] [--days 7] [--per-hour 100]
           [--partition hour|day] [--format parquet|jsonl] [--baseline-days 7]
           [--error-rate 0.10] [--label-delay 1] [--label-share 1.0] [--late-share 0]
           [--outcomes-inline] [--confidence-shift-from DAY] [--confidence-shift 0.1]
           [--harmful-shift-from DAY] [--shifted-error-rate 0.16] [--shift-segment KEY=VALUE]
           [--seed 0]

What it writes under OUT (days are UTC; DAY is a 0-based day after --start):

    records/date=YYYY-MM-DD/hour=HH/part-0.parquet   the decisions of that hour (--partition
                                                     day: records/date=YYYY-MM-DD/part-0.parquet)
    labels/date=YYYY-MM-DD/labels.parquet            outcomes that arrived that day: id, outcome,
                                                     timestamp (when the outcome arrived)
    baseline/date=YYYY-MM-DD/part-0.parquet          --baseline-days days before --start, no
                                                     shift, outcomes inline (a baseline for
                                                     `check --baseline` / `monitor --baseline`)

Every record has an id, a timestamp, the refund decision's probabilities, the selected
label and its confidence, an action from the policy of contracts/refund-monitor/decflow.yaml,
latency, cost and metadata with two segments (`locale`, `channel`). A record's correctness
is drawn first (error rate `--error-rate`), then its confidence from the distribution of
correct or wrong answers, so the model is about calibrated. The shifts:

- `--confidence-shift-from DAY`: from that day, confidences move toward 0.5 by the share
  `--confidence-shift` (0.1: a confidence of 0.95 becomes 0.905); which answers are correct
  does not change, so the error rate stays what it was (a shift that is not harmful).
- `--harmful-shift-from DAY`: from that day the error rate is `--shifted-error-rate` (only in
  `--shift-segment locale=de`, when given), while the confidences keep their distribution:
  the model does not know it got worse, only the labels show it.

Labels: each decision's outcome arrives `--label-delay` days later (plus up to 12 hours) for
the share `--label-share` of decisions, in the labels partition of the day it arrives.
`--outcomes-inline` also writes each outcome into the record itself (what `decflow check`
judges accuracy by). `--late-share`: that share of records lands in the next day's first
partition while keeping its own timestamp (late data for a window already checked).

The same seed, day and hour always give the same records. Partitions that exist are never
rewritten: run again with the same --start and a larger --days to add the next days (labels
are written only for days in the range: later outcomes have not arrived yet, and the last
day's late records wait for the next day). Uses numpy and pyarrow only.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DECISION = "refund_request"
LABELS = ("refund", "reject", "review")
INPUTS = {
    "refund": ("The blender arrived damaged and won't turn on.",
               "My parcel never arrived, tracking stopped two weeks ago.",
               "Screen was damaged in transit, photos attached."),
    "reject": ("I changed my mind about the colour, please take it back.",
               "I used it for three months and now want my money back."),
    "review": ("The invoice shows a different price than the website did.",
               "Charged twice for the same order."),
}
LOCALES = (("en", 0.5), ("de", 0.2), ("fr", 0.15), ("it", 0.1), ("es", 0.05))
CHANNELS = (("web", 0.6), ("app", 0.3), ("email", 0.1))
# Confidence = 0.5 + 0.5·Beta(a, b): correct answers sure, wrong ones less so (about
# calibrated at an error rate of 0.10: mean confidence ≈ 0.91).
CORRECT_BETA, WRONG_BETA = (8.0, 1.5), (3.0, 2.0)


@dataclass(frozen=True)
class Settings:
    per_hour: int
    error_rate: float
    label_delay: int
    label_share: float
    late_share: float
    outcomes_inline: bool
    confidence_shift_from: int | None
    confidence_shift: float
    harmful_shift_from: int | None
    shifted_error_rate: float
    shift_segment: tuple[str, str] | None
    seed: int


def _choice(rng: np.random.Generator, weighted: tuple[tuple[str, float], ...],
            n: int) -> np.ndarray:
    names = [name for name, _ in weighted]
    return rng.choice(names, size=n, p=[weight for _, weight in weighted])


def _from(day_index: int | None, first: int | None) -> bool:
    """Whether a shift starting on day `first` applies to day `day_index`."""
    return day_index is not None and first is not None and day_index >= first


def hour_records(settings: Settings, day: date, hour: int, day_index: int | None,
                 ) -> dict[str, np.ndarray]:
    """The decisions of one hour as columns (`day_index`: the day after --start, None for a
    baseline day). Seeded by (seed, day, hour) alone."""
    rng = np.random.default_rng([settings.seed, day.toordinal(), hour])
    n = settings.per_hour
    start = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
    seconds = np.sort(rng.integers(0, 3600, n))
    locale, channel = _choice(rng, LOCALES, n), _choice(rng, CHANNELS, n)
    truth = rng.integers(0, len(LABELS), n)
    # correctness as the model itself would expect it; its confidence follows from it
    expected_right = rng.random(n) >= settings.error_rate
    confidence = np.where(expected_right, rng.beta(*CORRECT_BETA, n), rng.beta(*WRONG_BETA, n))
    confidence = 0.5 + 0.5 * confidence
    right = expected_right.copy()
    if _from(day_index, settings.harmful_shift_from):
        extra = (settings.shifted_error_rate - settings.error_rate) / (1 - settings.error_rate)
        turned = rng.random(n) < extra
        if settings.shift_segment is not None:
            key, value = settings.shift_segment
            turned &= (locale if key == "locale" else channel) == value
        right &= ~turned
    if _from(day_index, settings.confidence_shift_from):
        confidence = confidence - settings.confidence_shift * (confidence - 0.5)
    confidence = np.round(confidence, 4)
    wrong_by = rng.integers(1, len(LABELS), n)
    selected = np.where(right, truth, (truth + wrong_by) % len(LABELS))
    # the other two labels share what the selected one leaves, neither above it
    rest = 1.0 - confidence
    split = np.round(rest * rng.uniform(0.2, 0.8, n), 4)
    probabilities = np.zeros((n, len(LABELS)))
    rows = np.arange(n)
    probabilities[rows, selected] = confidence
    probabilities[rows, (selected + 1) % len(LABELS)] = split
    probabilities[rows, (selected + 2) % len(LABELS)] = np.round(rest - split, 4)
    action = np.where(confidence >= 0.9, "accept",
                      np.where(confidence >= 0.7, "fallback", "human_review"))
    stamp = f"{day:%Y%m%d}-{hour:02d}"
    return {
        "id": np.array([f"rf-{stamp}-{i:05d}" for i in range(n)]),
        "timestamp": np.array([start + timedelta(seconds=int(s)) for s in seconds]),
        "input": np.array([INPUTS[LABELS[t]][i % len(INPUTS[LABELS[t]])]
                           for i, t in enumerate(truth)]),
        "probabilities": probabilities,
        "selected": np.array([LABELS[s] for s in selected]),
        "confidence": confidence,
        "outcome": np.array([LABELS[t] for t in truth]),
        "action": action,
        "latency_ms": np.round(rng.gamma(4.0, 40.0, n), 1),
        "cost": np.where(action == "fallback", 0.009, 0.002),
        "locale": locale,
        "channel": channel,
        "label_after_s": (settings.label_delay * 86400 + rng.integers(0, 12 * 3600, n)),
        "labelled": rng.random(n) < settings.label_share,
        "late": rng.random(n) < settings.late_share,
    }


def record_table(columns: dict[str, np.ndarray], rows: np.ndarray, *,
                 outcomes: bool) -> pa.Table:
    """The production records of `rows`, as Parquet columns (the JSONL fields)."""
    probabilities = columns["probabilities"][rows]
    table: dict[str, Any] = {
        "id": columns["id"][rows],
        "timestamp": pa.array(list(columns["timestamp"][rows]), pa.timestamp("us", "UTC")),
        "decision": [DECISION] * int(rows.size),
        "input": columns["input"][rows],
        "probabilities": pa.StructArray.from_arrays(
            [pa.array(probabilities[:, i]) for i in range(len(LABELS))], names=list(LABELS)),
        "selected": columns["selected"][rows],
        "confidence": columns["confidence"][rows],
        "backend": ["openjev"] * int(rows.size),
        "model": ["refund-v1"] * int(rows.size),
        "action": columns["action"][rows],
        "fallback": columns["action"][rows] == "fallback",
        "latency_ms": columns["latency_ms"][rows],
        "cost": columns["cost"][rows],
        "metadata_json": [json.dumps({"locale": str(loc), "channel": str(ch)})
                          for loc, ch in zip(columns["locale"][rows], columns["channel"][rows],
                                             strict=True)],
    }
    if outcomes:
        table["outcome"] = columns["outcome"][rows]
    return pa.table(table)


def write_table(table: pa.Table, path: Path, form: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "parquet":
        pq.write_table(table, path.with_suffix(".parquet"))
        return
    with path.with_suffix(".jsonl").open("w", encoding="utf-8") as out:
        for row in table.to_pylist():
            if "timestamp" in row:
                row["timestamp"] = row["timestamp"].isoformat().replace("+00:00", "Z")
            if "metadata_json" in row:
                row["metadata"] = json.loads(row.pop("metadata_json"))
            out.write(json.dumps(row) + "\n")


def concat(tables: list[pa.Table]) -> pa.Table | None:
    kept = [t for t in tables if t.num_rows]
    return pa.concat_tables(kept) if kept else None


def _write(table: pa.Table | None, path: Path, form: str) -> int:
    """Write a partition unless it exists (a longer run never rewrites one); rows written."""
    if table is None or table.num_rows == 0 or path.with_suffix(f".{form}").exists():
        return 0
    write_table(table, path, form)
    return int(table.num_rows)


def generate(out: Path, start: date, days: int, baseline_days: int, settings: Settings,
             *, partition: str = "hour", form: str = "parquet") -> dict[str, int]:
    """Write the records, labels and baseline under `out` (partitions that exist are left
    as they are); returns how many of each were written."""
    counts = {"records": 0, "labels": 0, "baseline": 0}
    labels: dict[date, list[pa.Table]] = {}
    late: list[pa.Table] = []  # the day before's late records: the next day's first partition
    for offset in range(-baseline_days, days):
        day = start + timedelta(days=offset)
        hours = [hour_records(settings, day, hour, offset if offset >= 0 else None)
                 for hour in range(24)]
        if offset < 0:
            every = np.arange(settings.per_hour)
            counts["baseline"] += _write(
                concat([record_table(c, every, outcomes=True) for c in hours]),
                out / "baseline" / f"date={day}" / "part-0", form)
            continue
        tables = [[record_table(c, np.flatnonzero(~c["late"]),
                                outcomes=settings.outcomes_inline)] for c in hours]
        tables[0] = late + tables[0]
        late = [record_table(c, np.flatnonzero(c["late"]), outcomes=settings.outcomes_inline)
                for c in hours]
        for columns in hours:
            _label_rows(columns, labels)
        folder = out / "records" / f"date={day}"
        if partition == "day":
            counts["records"] += _write(concat([t for own in tables for t in own]),
                                        folder / "part-0", form)
            continue
        for hour, own in enumerate(tables):
            counts["records"] += _write(concat(own), folder / f"hour={hour:02d}" / "part-0",
                                        form)
    end = start + timedelta(days=days)
    (out / "labels").mkdir(parents=True, exist_ok=True)  # labels may not have arrived yet
    for day, found in sorted(labels.items()):
        merged = concat(found)
        if day < end and merged is not None:  # later outcomes have not arrived yet
            counts["labels"] += _write(merged.sort_by("timestamp"),
                                       out / "labels" / f"date={day}" / "labels", form)
    return counts


def _label_rows(columns: dict[str, np.ndarray], labels: dict[date, list[pa.Table]]) -> None:
    """The labelled decisions' outcomes, filed under the day they arrive."""
    rows = np.flatnonzero(columns["labelled"])
    arrived = [columns["timestamp"][i] + timedelta(seconds=int(columns["label_after_s"][i]))
               for i in rows]
    for day in sorted({a.date() for a in arrived}):
        mine = [k for k, a in enumerate(arrived) if a.date() == day]
        labels.setdefault(day, []).append(pa.table({
            "id": columns["id"][rows[mine]],
            "outcome": columns["outcome"][rows[mine]],
            "timestamp": pa.array([arrived[k] for k in mine], pa.timestamp("us", "UTC")),
        }))


def _segment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or key not in ("locale", "channel") or not value:
        raise argparse.ArgumentTypeError("use locale=VALUE or channel=VALUE")
    return key, value


def main(argv: list[str] | None = None) -> None:
    # --help explains every option: the module's text, less its own usage paragraph
    described = [part for part in __doc__.split("\n\n") if not part.startswith("usage:")]
    parser = argparse.ArgumentParser(description="\n\n".join(described),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--start", type=date.fromisoformat, default=date(2026, 11, 1))
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--per-hour", type=int, default=100)
    parser.add_argument("--partition", choices=("hour", "day"), default="hour")
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--baseline-days", type=int, default=7)
    parser.add_argument("--error-rate", type=float, default=0.10)
    parser.add_argument("--label-delay", type=int, default=1)
    parser.add_argument("--label-share", type=float, default=1.0)
    parser.add_argument("--late-share", type=float, default=0.0)
    parser.add_argument("--outcomes-inline", action="store_true")
    parser.add_argument("--confidence-shift-from", type=int)
    parser.add_argument("--confidence-shift", type=float, default=0.1)
    parser.add_argument("--harmful-shift-from", type=int)
    parser.add_argument("--shifted-error-rate", type=float, default=0.16)
    parser.add_argument("--shift-segment", type=_segment)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0 <= args.error_rate < args.shifted_error_rate <= 1 and args.harmful_shift_from:
        parser.error("--shifted-error-rate must be above --error-rate")
    settings = Settings(args.per_hour, args.error_rate, args.label_delay, args.label_share,
                        args.late_share, args.outcomes_inline, args.confidence_shift_from,
                        args.confidence_shift, args.harmful_shift_from,
                        args.shifted_error_rate, args.shift_segment, args.seed)
    counts = generate(args.out, args.start, args.days, args.baseline_days, settings,
                      partition=args.partition, form=args.format)
    print(f"wrote {counts['records']} records, {counts['labels']} labels and "
          f"{counts['baseline']} baseline records under {args.out}")


if __name__ == "__main__":
    main()
