"""Production records: the unit of work (`units`: files, Parquet row groups, JSONL byte
ranges and the `SourcePlan` of a source), reading them (`reader`: normalized polars
tables; `parquet`, `blocks`: Parquet and JSONL block by block), what a record must be
(`rules`, `checks`: the vectorized checks) and raw bytes (`bytes`). Kept light: a check
plans its input (`units`) before polars loads."""
