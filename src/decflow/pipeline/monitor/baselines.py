"""A monitor's baseline: what its windows' drift and the harmful-shift alarm are measured
against (`--baseline` records, a check report, a check run or `accepted`), kept in its
state. Baseline records are read once: while their listing (names, sizes, versions) is
unchanged, later runs reuse the statistics the state holds and read no record byte. A run
without `--baseline` keeps the monitor's baseline; a different baseline restarts the
harmful-shift detector."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from decflow.data.records.units import SourcePlan, partition_files
from decflow.pipeline.monitor.stages import MonitorContext
from decflow.pipeline.monitor.state import MonitorState
from decflow.pipeline.production.baseline import Baseline, load_baseline, names_records
from decflow.pipeline.production.stages import CheckSpec
from decflow.pipeline.production.workers import read_units
from decflow.pipeline.stage import StageContext


@dataclass(frozen=True)
class MonitorBaseline:
    """The baseline (as a check's summary reads it), its identity (the hash of what it was
    made from) and whether it differs from the one the monitor had (`changed`)."""

    baseline: Baseline
    identity: str
    changed: bool

    @property
    def n_labelled(self) -> int:
        return int(self.baseline.metrics["outcomes"]["n"])

    @property
    def errors(self) -> int:
        """Labelled baseline records whose decision was wrong."""
        rate = self.baseline.metrics["outcomes"]["error_rate"]
        return 0 if rate is None else round(rate * self.n_labelled)


def _signature(source: str) -> str | None:
    """A listing of baseline records (no file opened), None for a run in the store."""
    if not names_records(source):
        return None
    listing = "".join(f"{p.name}\t{p.size}\t{p.version}\n" for p in partition_files(source))
    return hashlib.sha256(listing.encode()).hexdigest()


def monitor_baseline(context: MonitorContext, state: MonitorState) -> MonitorBaseline | None:
    """The run's baseline: the one given (read unless the state holds it unchanged), else
    the monitor's own, else none."""
    spec, stored = context.spec, state.baseline
    if spec.baseline is None:
        if stored is None:
            return None
        return MonitorBaseline(Baseline(stored["block"], stored["metrics"]), stored["identity"],
                               changed=False)
    signature = _signature(spec.baseline)
    if (stored is not None and stored["source"] == spec.baseline and signature is not None
            and stored["signature"] == signature):
        return MonitorBaseline(Baseline(stored["block"], stored["metrics"]), stored["identity"],
                               changed=False)
    check = CheckSpec(spec.contract_path, spec.baseline, spec.store_url, "",
                      SourcePlan(spec.baseline, [], [], []))
    here = StageContext(check, context.store, context.loaded, {}, logger=context.logger,
                        units=read_units)
    loaded = load_baseline(here, spec.baseline)
    identity = str(loaded.block["hash"])
    state.baseline = {"source": spec.baseline, "signature": signature, "identity": identity,
                      "block": loaded.block, "metrics": loaded.metrics}
    return MonitorBaseline(loaded, identity,
                           changed=stored is None or stored["identity"] != identity)
