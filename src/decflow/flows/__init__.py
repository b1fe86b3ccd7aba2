"""Prefect flows: `contract_run`, `production_check`, `nightly_regression`, `replay`.

Flows only orchestrate: they call the tasks of `decflow.tasks` in the same order as the
in-process runner (`decflow.pipeline.contract_run.runner`) and record the run in the same
store, so a run started by either can be resumed, re-gated or diffed by the other.
"""
