"""Prefect tasks: thin wrappers over the pipeline's stage functions (manifests in, out).

One task per stage, one per shard of backend calls; Prefect caching is off (the store is
the cache). Only `decflow.tasks` and `decflow.flows` import prefect.
"""
