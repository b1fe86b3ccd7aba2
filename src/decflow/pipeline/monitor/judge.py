"""The monitor run's verdict stage (`JUDGE`): the state updated with what this run read
(partitions new, rewritten or gone; labels arrived), each window whose inputs changed
judged again and stored as a window run (superseding its earlier report), the
harmful-shift detector fed the newly labelled records window by window in data order (or,
when it starts again, every labelled record held: `alarm.advance`), the monitor report
written, and the state committed last.

A run that read nothing changes nothing: its report is the state as it stands (the same
windows, detector and verdict), with nothing read.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from decflow.data.records.id_hashes import ID_HASH
from decflow.data.records.reader import RecordSpec
from decflow.metrics.harmful_shift import RiskMetric
from decflow.pipeline.monitor import pieces
from decflow.pipeline.monitor.alarm import History, advance, window_losses, window_risk
from decflow.pipeline.monitor.baselines import MonitorBaseline, monitor_baseline
from decflow.pipeline.monitor.index import (
    entries,
    index_path,
    read_index,
    updated,
    write_index,
)
from decflow.pipeline.monitor.labels import (
    LABEL_SCHEMA,
    first_labels,
    join_labels,
    with_correctness,
)
from decflow.pipeline.monitor.report import build_report
from decflow.pipeline.monitor.scan import prediction_schema
from decflow.pipeline.monitor.spec import (
    BACKEND,
    MonitorSpec,
    piece_settings,
    source_identity,
)
from decflow.pipeline.monitor.stages import MonitorContext, settings, stored_state
from decflow.pipeline.monitor.state import (
    KEPT_RUNS,
    MonitorRun,
    MonitorState,
    Seen,
    Window,
    WindowReport,
)
from decflow.pipeline.monitor.window_runs import Recheck, judge_window, window_digest
from decflow.pipeline.monitor.windows import window_aggregates
from decflow.pipeline.production.statistics import binning
from decflow.pipeline.stage import Stage
from decflow.store.monitors import (
    labels_path,
    piece_paths,
    unnamed_pieces,
    write_state,
)
from decflow.store.runs import write_report
from decflow.store.store import Manifest

NEW, LATE, LABELS, REWRITTEN = "new records", "late records", "labels", "rewritten partition"
_NOTHING_LABELLED = pl.DataFrame(schema={"window": pl.String, "confidence": pl.Float64,
                                         "correct": pl.Int8, "labelled": pl.Boolean})


def _new_state(context: MonitorContext) -> MonitorState:
    spec, contract = context.spec, context.loaded.contract
    return MonitorState(spec.monitor_id, contract.decision.name, BACKEND,
                        source_identity(spec.source), spec.labels, settings(context).window,
                        ID_HASH, piece_settings(contract))


@dataclass
class Reading:
    """What this run changes: windows to judge again (and why), what it read."""

    touched: dict[str, str] = field(default_factory=dict)  # window -> reason
    emptied: list[str] = field(default_factory=list)  # windows no partition holds any more
    read: dict[str, Any] = field(default_factory=dict)

    def touch(self, window: str, reason: str) -> None:
        # the first reason found for a window is kept (records before labels)
        self.touched.setdefault(window, reason)


def _adopt_partitions(context: MonitorContext, state: MonitorState, reading: Reading) -> None:
    """The partitions this run read, and those gone, into the state."""
    spec = context.spec
    for piece in context.manifests["partitions"].extra["pieces"]:
        old = state.partitions.get(piece["name"])
        for window in sorted(set(piece["windows"]) | set(old.windows if old else {})):
            reason = REWRITTEN if old is not None else LATE if window in state.windows else NEW
            reading.touch(window, reason)
        state.partitions[piece["name"]] = Seen(
            piece["name"], piece["path"], piece["size"], piece["version"], piece["key"],
            spec.run_id, spec.run_id if old is None else old.first_read_in,
            n_records=piece["n_records"], windows=piece["windows"], digest=piece["digest"],
            rewritten=0 if old is None else old.rewritten + 1)
    for name in spec.gone:
        state.partitions[name].gone = spec.run_id


def _adopt_labels(context: MonitorContext, state: MonitorState) -> None:
    spec = context.spec
    for found in context.manifests["labels"].extra["labels"]:
        old = state.labels.get(found["name"])
        state.labels[found["name"]] = Seen(
            found["name"], found["path"], found["size"], found["version"], found["key"],
            spec.run_id, spec.run_id if old is None else old.first_read_in,
            n_records=found["n_labels"], rewritten=0 if old is None else old.rewritten + 1,
            seq=found["seq"])
    for name in spec.labels_gone:
        state.labels[name].gone = spec.run_id


class Pieces:
    """The monitor's stored pieces as this run reads them: each predictions piece and
    labels file read from the store once, however many joins use it."""

    def __init__(self, context: MonitorContext, monitor: str) -> None:
        self.store, self.monitor = context.store, monitor
        self.segments = RecordSpec.from_contract(context.loaded.contract).segments
        self.read: dict[str, pl.DataFrame] = {}

    def predictions(self, keys: Iterable[str]) -> pl.DataFrame:
        found = [self._once(key, False) for key in sorted(set(keys))]
        return pl.concat(found) if found else pl.DataFrame(
            schema=prediction_schema(self.segments))

    def labels(self, keys: Iterable[str]) -> pl.DataFrame:
        found = [self._once(key, True) for key in sorted(set(keys))]
        return pl.concat(found) if found else pl.DataFrame(schema=LABEL_SCHEMA)

    def piece(self, key: str) -> pl.DataFrame:
        """One predictions piece, as read already or from the store, not kept (a replay of
        the whole history reads each piece once)."""
        found = self.read.get(key)
        return found if found is not None else pieces.read_predictions(
            self.store, self.monitor, [key], self.segments)

    def _once(self, key: str, labels: bool) -> pl.DataFrame:
        if key not in self.read:
            self.read[key] = (
                pieces.read_labels(self.store, self.monitor, [key], LABEL_SCHEMA) if labels
                else pieces.read_predictions(self.store, self.monitor, [key], self.segments))
        return self.read[key]


@dataclass(frozen=True)
class Labelled:
    """What this run learnt: the predictions whose correctness became known (`newly`:
    read this run with their outcome inline, or joined to a label that arrived, or whose
    decision arrived after its label), every label joined to a prediction (`labels`), and
    the totals of the labels so far."""

    newly: pl.DataFrame
    labels: pl.DataFrame
    totals: dict[str, int]


def _anonymous(stored: Pieces, read: dict[str, str | None]) -> pl.DataFrame:
    """The records without an id that carry their outcome, of the pieces read this run
    (`read`: each with the piece its partition had when read before, if it was). A record
    without an id cannot be told from one read before: a partition read again takes the
    first as many of them (in file order) as its earlier piece held as those, fed already,
    so records appended are fed and records changed in place are not fed again (as a
    record with an id is not)."""
    def anonymous(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("h").is_null() & (pl.col("correct") >= 0))

    found = [anonymous(stored.predictions([key])).slice(
        0 if old is None else anonymous(stored.piece(old)).height)
        for key, old in sorted(read.items())]
    return pl.concat([anonymous(stored.predictions([])), *found]).with_columns(
        labelled=pl.lit(False))


def _learnt(state: MonitorState, stored: Pieces, before: MonitorState, index: pl.DataFrame,
            old_index: pl.DataFrame, read: dict[str, str | None]) -> Labelled:
    """The newly labelled predictions, reading only the pieces that can hold them: the
    pieces read this run (`read`, each with its partition's earlier piece) and those
    holding the decision of a label that arrived."""
    labels = stored.labels(s.key for s in state.labels.values())
    arrived = stored.labels(s.key for n, s in state.labels.items()
                            if before.labels.get(n) != s)
    holding = index.filter(pl.col("h").is_in(arrived["h"].implode()))["piece"].to_list()
    candidates = stored.predictions([*read, *holding])
    after = join_labels(candidates, labels).predictions.filter(pl.col("correct") >= 0)
    known = first_labels(stored.labels(s.key for s in before.labels.values()))["h"]
    was = old_index.filter(pl.col("inline") | pl.col("h").is_in(known.implode()))["h"]
    newly = pl.concat([
        after.filter(pl.col("h").is_not_null() & ~pl.col("h").is_in(was.implode())),
        _anonymous(stored, read)])
    first = first_labels(labels).join(index.select("h", "inline"), on="h", how="left")
    joined = int((first["inline"] == False).sum())  # noqa: E712 - a polars comparison
    pending = int(first["inline"].is_null().sum())
    return Labelled(newly, labels, {"labels_repeated": labels.height - joined - pending,
                                    "labels_pending": pending})


def _history(state: MonitorState, stored: Pieces) -> History:
    """Every labelled prediction the monitor holds (each piece joined to the first labels),
    as each data window's labelled records and loss sum, in window order; read piece by
    piece (a detector started again replays it)."""
    def losses(metric: RiskMetric) -> pl.DataFrame:
        first = first_labels(stored.labels(s.key for s in state.labels.values()))
        sums = [window_losses(metric, with_correctness(stored.piece(key), first)
                              .filter(pl.col("correct") >= 0))
                for key in sorted({s.key for s in state.partitions.values()})]
        return (pl.concat(sums).group_by("window").agg(pl.col("n").sum(), pl.col("loss").sum())
                .sort("window") if sums else window_losses(metric, _NOTHING_LABELLED))
    return losses


def _label_totals(state: MonitorState, learnt: Labelled | None) -> dict[str, int]:
    """Labels repeated (ignored) and pending (no decision yet) so far; the last run's when
    this run read nothing (`learnt` None)."""
    if learnt is not None:
        return learnt.totals
    last = state.runs[-1].read if state.runs else {}
    return {"labels_repeated": int(last.get("labels_repeated", 0)),
            "labels_pending": int(last.get("labels_pending", 0))}


def _judge_windows(context: MonitorContext, state: MonitorState, stored: Pieces,
                   learnt: Labelled | None, baseline: MonitorBaseline | None,
                   reading: Reading) -> list[str]:
    """Judge every touched window again; returns the windows judged, in time order (none
    when nothing was read: `learnt` None)."""
    if learnt is None:
        return []
    spec, store, loaded = context.spec, context.store, context.loaded
    records = RecordSpec.from_contract(loaded.contract)
    n_bins, _ = binning(loaded.contract)
    judged = []
    for window in sorted(reading.touched):
        holding = [(name, s) for name, s in sorted(state.partitions.items())
                   if window in s.windows]
        if not holding:  # its records were rewritten away: no window left to judge
            state.windows.pop(window, None)
            reading.emptied.append(window)
            continue
        stats = [pieces.read_stats(store, state.monitor_id, s.key) for _, s in holding]
        mine = join_labels(stored.predictions(s.key for _, s in holding),
                           learnt.labels).predictions.filter(pl.col("window") == window)
        n_labelled = int((mine["correct"] >= 0).sum())
        aggregates = window_aggregates(
            window, stats, mine, records, n_bins, source=spec.source,
            digest=window_digest([(n, s.digest) for n, s in holding], n_labelled),
            files=[n for n, _ in holding])
        before = state.windows.get(window)
        recheck = Recheck(window, state.window, reading.touched[window],
                          None if before is None else before.current.run_id)
        done = judge_window(store, spec, loaded, recheck, aggregates,
                            None if baseline is None else baseline.baseline)
        report = WindowReport(done.run_id, spec.run_id, reading.touched[window], done.status,
                              done.headline)
        state.windows[window] = Window(
            window, aggregates.overall.total, n_labelled, [n for n, _ in holding],
            [*(before.reports if before else []), report], done.gates(),
            window_risk(_risk_metric(context), mine.filter(pl.col("correct") >= 0)))
        judged.append(window)
    return judged


def _risk_metric(context: MonitorContext) -> RiskMetric:
    """The risk a window's chart shows: the harmful-shift alarm's, else the error rate."""
    shift = settings(context).harmful_shift
    return "error_rate" if shift is None else shift.metric


def _commit(context: MonitorContext, state: MonitorState, index: pl.DataFrame | None) -> None:
    """The id index (`index`, when this run changed it) and the state, the state last; then
    what no state names any more is removed."""
    store, monitor = context.store, state.monitor_id
    if index is not None:
        state.id_index = write_index(store, monitor, index)
    state.commits += 1
    write_state(store, monitor, state.to_dict())
    named = {path for s in state.partitions.values() for path in piece_paths(monitor, s.key)}
    named |= {labels_path(monitor, s.key) for s in state.labels.values()}
    if state.id_index is not None:
        named.add(index_path(monitor, state.id_index))
    for path in unnamed_pieces(store, monitor, named):
        store.discard(path)


def _judge(context: MonitorContext, key: str) -> Manifest:
    spec, store = context.spec, context.store
    state = stored_state(context) or _new_state(context)
    # a state from before settings were stored records them now (the plan checked its window)
    state.settings = state.settings or piece_settings(context.loaded.contract)
    before = copy.deepcopy(state)
    stored = Pieces(context, state.monitor_id)
    reading = Reading()
    _adopt_partitions(context, state, reading)
    _adopt_labels(context, state)
    learnt: Labelled | None = None  # nothing read: nothing learnt, no piece read
    index: pl.DataFrame | None = None
    newly = _NOTHING_LABELLED
    if spec.to_read or spec.labels_to_read:
        read = {p["key"]: None if p["name"] not in before.partitions
                else before.partitions[p["name"]].key
                for p in context.manifests["partitions"].extra["pieces"]}
        old_index = read_index(store, state.monitor_id, state.id_index)
        index = updated(old_index, {s.key for s in state.partitions.values()},
                        {k: entries(stored.predictions([k]), k) for k in read})
        learnt = _learnt(state, stored, before, index, old_index, read)
        newly = learnt.newly
    for window in newly.filter(pl.col("labelled"))["window"].unique().to_list():
        reading.touch(window, LABELS)
    baseline = monitor_baseline(context, state)
    checked = _judge_windows(context, state, stored, learnt, baseline, reading)
    if checked:
        state.last_checked = checked
    advanced = advance(context, state, baseline, newly, _history(state, stored))
    reading.read = {
        "partitions_listed": spec.listed, "new": [p.name for p in spec.to_read
                                                  if p.name not in spec.rewritten],
        "rewritten": list(spec.rewritten), "gone": list(spec.gone),
        "labels_new": [p.name for p in spec.labels_to_read
                       if p.name not in spec.labels_rewritten],
        "labels_rewritten": list(spec.labels_rewritten), "labels_gone":
        list(spec.labels_gone), "bytes_read": spec.bytes_to_read,
        "records_read": sum(u.n_records for u in spec.plan.units),
        "labels_joined": int(newly["labelled"].sum()), "newly_labelled": newly.height,
        "windows_emptied": reading.emptied,
        **_label_totals(state, learnt),
    }
    report = build_report(context, state, reading.read, checked, baseline, advanced)
    state.runs = [*state.runs, MonitorRun(spec.run_id, spec.created_at, report["status"],
                                          report["headline"], reading.read)][-KEPT_RUNS:]
    verdict: dict[str, Any] = {"status": report["status"], "exit_code": report["exit_code"],
                               "headline": report["headline"],
                               "report": write_report(store, spec.run_id, report),
                               "windows": checked}
    _commit(context, state, index)
    context.outputs["report"] = report
    frame = pl.DataFrame({"window": checked}, schema={"window": pl.String})
    return store.publish("monitor", key, frame, extra=verdict)


# Recomputed on every run: it reads the monitor's state, which every run changes.
JUDGE: Stage[MonitorSpec] = Stage(
    "monitor", "1", ("partitions", "labels"), _judge, keyed_by_run=True, cached=False,
    verdict=True, title="judge the windows, update the detector, write the report")
