"""Report format versions: the one place that names them.

Every report kind (run, diff, check, probe, replay) carries `report_version`. This release
writes `decflow/4` for all of them: a report may carry `qualifiers` (what its headline's
`(name: detail)` parts say: `zero_limit`, `underpowered`, …), a sequential run's gate
rows their interval's level and kind, and a check report `config.gating: evidence` when its
production gates were judged by evidence (absent: DecGuard's point estimates). `decflow/3`
added `not_established` checks with `evidence` and a `headline` (the first line of every
view) after `exit_code`. Runs stored by
older decflow releases — `decflow/3`, run reports `decflow/2` (persona axes with the
case-level excess) and `decflow/1`, other kinds `decflow/1` — still show and re-gate.
DecGuard 0.1 run reports carry "0.1" and are read unchanged.
"""

RUN_REPORT_VERSION = "decflow/4"
REPORT_VERSION = "decflow/4"
DECGUARD_REPORT_VERSION = "0.1"
# Run reports `decflow report`, `diff` and `replay` read: the current one, those stored by
# older decflow releases (shown and re-gated), and DecGuard's.
RUN_REPORT_VERSIONS = (RUN_REPORT_VERSION, "decflow/3", "decflow/2", "decflow/1",
                       DECGUARD_REPORT_VERSION)
# Diff, check, probe and replay reports written by this release and older ones.
REPORT_VERSIONS = (REPORT_VERSION, "decflow/3", "decflow/1")
