"""A monitor's state: what it has checked and what it knows, as stored in
`monitors/<id>/state.json` (`store.monitors`).

- `partitions`: every partition of the source the monitor read, by name: its size and
  version (mtime or ETag) when read — how a later listing tells it unchanged, rewritten
  or new without opening it —, its sha256, records per window, the piece holding its
  statistics and predictions, the run that read it, how often it was read again after a
  rewrite, and `gone` (the run that first missed it: retention removed it; its numbers
  stay in the history).
- `labels`: every labels partition read, likewise, with its arrival order (`seq`).
- `windows`: the time series — per window its current report (run id, status, headline,
  the gated values with their bands for the chart), counts, and the history of its
  reports (each run that checked it, and why: new records, late records, labels, a
  rewritten partition).
- `detector`: the harmful-shift detector's own state (`metrics.harmful_shift`), the
  baseline it was started from, and `runs`: the last monitor runs with what each read.
- `id_index`: the file listing every stored prediction's id hash and piece (`index.py`).
- `settings`: the contract's settings the pieces were made with (window, bins, confidence
  threshold, segments, labels): a run whose contract changed one is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from decflow.data.records.units import Partition

STATE_VERSION = 1
KEPT_RUNS = 200  # monitor runs listed in the state (their runs stay in `runs/`)


@dataclass
class Seen:
    """A partition the monitor read (records or labels)."""

    name: str
    path: str
    size: int
    version: str
    key: str  # the piece (records) or labels file holding what it gave
    read_in: str  # the run that read it last
    first_read_in: str
    n_records: int = 0
    windows: dict[str, int] = field(default_factory=dict)  # records per window
    digest: str = ""  # sha256 of its bytes when read
    rewritten: int = 0  # times it was read again after a rewrite
    gone: str | None = None  # the run that first found it missing
    seq: int = 0  # labels: arrival order

    def matches(self, listed: Partition) -> bool:
        """Whether a listing shows it unchanged (same size and version)."""
        return self.size == listed.size and self.version == listed.version


@dataclass
class WindowReport:
    """One report of a window: its run, what made it, its verdict."""

    run_id: str
    monitor_run: str
    reason: str  # new records | late records | labels | rewritten partition | baseline
    status: str
    headline: str


@dataclass
class Window:
    """A window's current numbers and the history of its reports (oldest first; the last
    is current, the others superseded)."""

    name: str
    n_records: int
    n_labelled: int
    partitions: list[str]
    reports: list[WindowReport]
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)  # for the chart
    risk: dict[str, Any] = field(default_factory=dict)  # labelled: n, loss sum, metric

    @property
    def current(self) -> WindowReport:
        return self.reports[-1]


@dataclass
class MonitorRun:
    run_id: str
    at: str
    status: str
    headline: str
    read: dict[str, Any]  # partitions new/rewritten/gone, labels, bytes read


@dataclass
class MonitorState:
    monitor_id: str
    decision: str
    backend: str
    source: str
    labels_source: str | None
    window: str
    id_hash: str
    # the contract's settings its pieces were made with (`spec.piece_settings`); None in a
    # state from before they were stored, until its next run records them
    settings: dict[str, Any] | None = None
    partitions: dict[str, Seen] = field(default_factory=dict)
    labels: dict[str, Seen] = field(default_factory=dict)
    windows: dict[str, Window] = field(default_factory=dict)
    baseline: dict[str, Any] | None = None  # identity and statistics of the baseline
    detector: dict[str, Any] | None = None
    runs: list[MonitorRun] = field(default_factory=list)
    last_checked: list[str] = field(default_factory=list)  # windows of the last run checking
    id_index: str | None = None  # the id index (`index.py`) of the pieces named here
    commits: int = 0
    version: int = STATE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MonitorState:
        values = dict(data)
        values["partitions"] = {k: Seen(**v) for k, v in data["partitions"].items()}
        values["labels"] = {k: Seen(**v) for k, v in data["labels"].items()}
        values["windows"] = {
            k: Window(**{**v, "reports": [WindowReport(**r) for r in v["reports"]]})
            for k, v in data["windows"].items()}
        values["runs"] = [MonitorRun(**r) for r in data["runs"]]
        return cls(**values)

    def next_seq(self) -> int:
        return 1 + max((s.seq for s in self.labels.values()), default=0)


@dataclass(frozen=True)
class Changes:
    """A listing of a source against what the monitor read: partitions it has not read
    (`new`), read but changed since (`rewritten`), read and still the same (`unchanged`),
    and read but no longer listed (`gone`, names)."""

    new: list[Partition]
    rewritten: list[Partition]
    unchanged: list[Partition]
    gone: list[str]

    @property
    def to_read(self) -> list[Partition]:
        """What a run reads, in name order."""
        return sorted([*self.new, *self.rewritten], key=lambda p: p.name)

    @property
    def bytes_to_read(self) -> int:
        return sum(p.size for p in self.to_read)

    def to_dict(self) -> dict[str, Any]:
        return {"new": [p.name for p in self.new],
                "rewritten": [p.name for p in self.rewritten],
                "unchanged": len(self.unchanged), "gone": list(self.gone)}


def changes(seen: dict[str, Seen], listing: Sequence[Partition]) -> Changes:
    """Compare a listing (never opening a file) with the partitions already read."""
    new, rewritten, unchanged = [], [], []
    for partition in listing:
        known = seen.get(partition.name)
        if known is None:
            new.append(partition)
        elif known.matches(partition):
            unchanged.append(partition)
        else:
            rewritten.append(partition)
    listed = {p.name for p in listing}
    gone = [name for name, s in seen.items() if name not in listed and s.gone is None]
    return Changes(new, rewritten, unchanged, gone)
