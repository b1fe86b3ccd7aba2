"""Orchestration tests: a real Prefect server, flows, tasks and deployments."""
