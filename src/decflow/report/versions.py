"""Report format versions: the one place that names them.

Each report kind carries `report_version`. Contract-run reports are `decflow/2` (persona
axes carry the case-level excess over placebo flips; `decflow/1` had attributable rates);
diff, production-check, probe and replay reports, whose shape has not changed, are
`decflow/1`. DecGuard 0.1 run reports carry "0.1" and are read unchanged.
"""

RUN_REPORT_VERSION = "decflow/2"
REPORT_VERSION = "decflow/1"
DECGUARD_REPORT_VERSION = "0.1"
# Run reports `decflow report`, `diff` and `replay` read: the current one, those stored by
# older decflow releases (shown and re-gated), and DecGuard's.
RUN_REPORT_VERSIONS = (RUN_REPORT_VERSION, "decflow/1", DECGUARD_REPORT_VERSION)
