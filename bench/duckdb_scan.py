"""DuckDB computing the check's groupings on the same Parquet file, in SQL: what a user who
can write SQL might run instead of `decflow check`. Counts, correct, mean and p95 of
confidence and latency, abstentions and distinct ids — for all records, per segment
(`metadata_json.locale`) and per confidence bin — with no validation and no report.

usage: python bench/duckdb_scan.py RECORDS.parquet
"""

from __future__ import annotations

import sys

import duckdb

STATS = """
    count(*) AS n,
    sum(CASE WHEN selected = outcome THEN 1 ELSE 0 END) AS correct,
    avg(confidence) AS confidence_mean,
    quantile_cont(confidence, 0.95) AS confidence_p95,
    avg(latency_ms) AS latency_mean,
    quantile_cont(latency_ms, 0.95) AS latency_p95,
    sum(CASE WHEN action = 'abstain' THEN 1 ELSE 0 END) AS abstentions,
    count(DISTINCT id) AS distinct_ids
"""

QUERY = f"""
WITH records AS (
    SELECT id, selected, outcome, latency_ms, action,
           greatest(probabilities.refund, probabilities.reject, probabilities.review)
               AS confidence,
           json_extract_string(metadata_json, '$.locale') AS locale
    FROM read_parquet(?)
)
SELECT locale, least(greatest(ceil(confidence * 10), 1), 10) AS bin,
       {STATS}
FROM records
GROUP BY GROUPING SETS ((), (locale), (bin), (locale, bin))
"""


def main() -> None:
    rows = duckdb.connect().execute(QUERY, [sys.argv[1]]).fetchall()
    total = next(r for r in rows if r[0] is None and r[1] is None)
    segments = sum(1 for r in rows if r[0] is not None and r[1] is None)
    bins = sum(1 for r in rows if r[1] is not None)
    print(total[2], segments, bins, total[-1])


if __name__ == "__main__":
    main()
