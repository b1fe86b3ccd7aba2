"""Report format versions: the one place that names them.

Every decflow report (run, diff, production check, probe, replay) carries
`report_version`; DecGuard 0.1 run reports carry "0.1" and are read unchanged.
"""

REPORT_VERSION = "decflow/1"
DECGUARD_REPORT_VERSION = "0.1"
# Run reports `decflow report`, `diff` and `replay` read (the current one first).
RUN_REPORT_VERSIONS = (REPORT_VERSION, DECGUARD_REPORT_VERSION)
