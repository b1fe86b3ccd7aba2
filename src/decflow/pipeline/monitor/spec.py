"""What a monitor run is asked to do (`MonitorSpec`), and how it is planned: the source and
labels are listed (names, sizes, versions: no file is opened), compared with the monitor's
state, and only the partitions it has not read (new, or rewritten since) are hashed,
counted and split into units — the check's own plan, of those files alone."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from decflow.contracts.contract import Contract
from decflow.contracts.decision import LABEL_KEYS
from decflow.contracts.sections import Monitor
from decflow.data.records.reader import RecordSpec
from decflow.data.records.units import Partition, SourcePlan, partition_files, plan_source
from decflow.data.records.windows import window_of
from decflow.errors import DecflowError
from decflow.pipeline.monitor.state import Changes, MonitorState, changes
from decflow.pipeline.production.baseline import names_records
from decflow.pipeline.production.statistics import binning
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stored.check_runs import stored_check
from decflow.store.monitors import monitor_id, read_state
from decflow.store.remote import is_url
from decflow.store.runs import now_iso
from decflow.store.store import Store

BACKEND = "records"  # a monitor reads logged decisions, as a check run does


def _partition(data: dict[str, Any]) -> Partition:
    return Partition(**data)


def _listed(partitions: tuple[Partition, ...]) -> list[dict[str, Any]]:
    return [{"path": p.path, "name": p.name, "size": p.size, "version": p.version}
            for p in partitions]


@dataclass(frozen=True)
class MonitorSpec:
    """A monitor run: the contract, the source as given and as identified (`monitor_id`),
    the partitions to read (`to_read`, planned into units as `plan`), those no longer
    listed (`gone`), the labels partitions to read and gone, the baseline, the window of
    this run for records without a timestamp (`arrival`), and what the listing found."""

    contract_path: str
    source: str
    store_url: str
    run_id: str
    monitor_id: str
    plan: SourcePlan
    to_read: tuple[Partition, ...] = ()
    rewritten: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    listed: int = 0
    labels: str | None = None
    labels_to_read: tuple[Partition, ...] = ()
    labels_rewritten: tuple[str, ...] = ()
    labels_gone: tuple[str, ...] = ()
    baseline: str | None = None
    arrival: str = ""
    created_at: str = field(default_factory=lambda: now_iso())
    parent: str | None = None

    @property
    def records(self) -> str:
        return self.source

    @property
    def bytes_to_read(self) -> int:
        return sum(p.size for p in (*self.to_read, *self.labels_to_read))

    def to_dict(self) -> dict[str, Any]:
        return {
            "contract_path": self.contract_path, "source": self.source,
            "store_url": self.store_url, "run_id": self.run_id,
            "monitor_id": self.monitor_id, "plan": self.plan.to_dict(),
            "to_read": _listed(self.to_read), "rewritten": list(self.rewritten),
            "gone": list(self.gone), "listed": self.listed, "labels": self.labels,
            "labels_to_read": _listed(self.labels_to_read),
            "labels_rewritten": list(self.labels_rewritten),
            "labels_gone": list(self.labels_gone), "baseline": self.baseline,
            "arrival": self.arrival, "created_at": self.created_at, "parent": self.parent,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MonitorSpec:
        return cls(**{
            **data, "plan": SourcePlan.from_dict(data["plan"]),
            "to_read": tuple(_partition(p) for p in data["to_read"]),
            "rewritten": tuple(data["rewritten"]), "gone": tuple(data["gone"]),
            "labels_to_read": tuple(_partition(p) for p in data["labels_to_read"]),
            "labels_rewritten": tuple(data["labels_rewritten"]),
            "labels_gone": tuple(data["labels_gone"]),
        })

    def resume_command(self) -> str:
        """A monitor run is not resumed: the next run plans again from the state, which
        only a finished run changes."""
        parts = ["decflow", "monitor", self.contract_path, "-d", self.source]
        if self.labels:
            parts += ["--labels", self.labels]
        if self.baseline:
            parts += ["--baseline", self.baseline]
        return " ".join(shlex.quote(p) for p in [*parts, "--store", self.store_url])


def source_identity(source: str) -> str:
    """A source as a monitor identifies it: a local path made absolute (the same folder
    from any working directory), a URL as given."""
    return source if is_url(source) else os.path.abspath(source)


def monitor_of(contract_path: str, source: str) -> str:
    """The id of the monitor of the contract's decision over `source`."""
    decision = load_contract_cached(contract_path).contract.decision.name
    return monitor_id(decision, BACKEND, source_identity(source))


def piece_settings(contract: Contract) -> dict[str, Any]:
    """The contract's settings what a monitor keeps was made with, by field: the window
    its records are split by, the statistics' bins and confidence threshold, the segment
    keys of its groups and predictions, and the labels its predictions number. Pieces made
    with other values do not merge with them (nor mean the same)."""
    n_bins, threshold = binning(contract)
    decision = contract.decision
    labels = next(key for key, kind in LABEL_KEYS.items() if kind == decision.type)
    return {"monitor.window": (contract.monitor or Monitor()).window,
            "evaluation.calibration_bins": n_bins,
            "evaluation.confidence_threshold": threshold,
            "production.segments": list(RecordSpec.from_contract(contract).segments),
            f"decision.{labels}": list(decision.labels)}


def check_settings(state: MonitorState, contract: Contract, contract_path: str,
                   store: str) -> None:
    """Refuse a contract that changed a setting the monitor's pieces were made with (its
    first run's, stored in its state; a state from before they were stored knows only its
    window and records the others on its next run)."""
    stored = state.settings or {"monitor.window": state.window}
    now = piece_settings(contract)
    changed = [f"{name} changed from {value!r} (the monitor's first run) to "
               f"{now.get(name)!r}" for name, value in stored.items() if now.get(name) != value]
    if changed:
        them = "it" if len(changed) == 1 else "them"
        raise DecflowError(
            f"{contract_path}: {'; '.join(changed)}: monitor {state.monitor_id} in store "
            f"{store} keeps windows made with its first run's settings, and records read "
            f"with other ones would not merge with them; set {them} back, or start a new "
            "monitor with the new settings in another store (--store)")


def plan_monitor(contract_path: str, source: str, store: Store, run_id: str, *,
                 labels: str | None = None, baseline: str | None = None,
                 absolute: bool = False) -> MonitorSpec:
    """The monitor run's spec: list the source (and labels), compare with the state, plan
    the partitions to read (`absolute`: local paths absolute, for workers elsewhere). Call
    it holding the monitor's lock (`store.monitors.monitor_lock`)."""
    contract = load_contract_cached(contract_path).contract
    settings = contract.monitor or Monitor()
    monitor = monitor_of(contract_path, source)
    if baseline is not None and not names_records(baseline):  # said before a run is made
        stored_check(store, baseline, contract.decision.name)
    stored = read_state(store, monitor)
    state = None if stored is None else MonitorState.from_dict(stored)
    if state is not None:
        check_settings(state, contract, contract_path, store.location)
    found = changes({} if state is None else state.partitions,
                    partition_files(source, empty_folder=True))
    label_changes = (None if labels is None else
                     changes({} if state is None else state.labels,
                             partition_files(labels, empty_folder=True)))
    to_read = found.to_read
    paths = [os.path.abspath(p.path) if absolute and not is_url(p.path) else p.path
             for p in to_read]
    plan = (plan_source(paths, shown_path=source) if paths
            else SourcePlan(source, [], [], []))
    return MonitorSpec(
        contract_path, source, store.location, run_id, monitor, plan,
        to_read=tuple(to_read), rewritten=tuple(p.name for p in found.rewritten),
        gone=tuple(found.gone), listed=_count(found), labels=labels,
        labels_to_read=() if label_changes is None else tuple(label_changes.to_read),
        labels_rewritten=() if label_changes is None else tuple(
            p.name for p in label_changes.rewritten),
        labels_gone=() if label_changes is None else tuple(label_changes.gone),
        baseline=baseline, arrival=window_of(datetime.now(UTC), settings.window),
    )


def _count(found: Changes) -> int:
    return len(found.new) + len(found.rewritten) + len(found.unchanged)
