"""The production-check pipeline: records → aggregates → summary → report, over decision
logs (files, folders, globs of JSONL/JSON/Parquet)."""
