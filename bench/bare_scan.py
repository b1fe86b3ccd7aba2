"""The baseline of `check_bench.py`: a bare polars lazy scan computing the check's groupings
on the same Parquet file — counts, correct, mean and p95 of confidence and latency,
confidence bins, per-segment stats, distinct ids — with no validation and no report.

usage: python bench/bare_scan.py RECORDS.parquet
"""

from __future__ import annotations

import sys

import polars as pl

LABELS = ("refund", "reject", "review")


def main() -> None:
    scan = pl.scan_parquet(sys.argv[1]).with_columns(
        confidence=pl.max_horizontal([pl.col("probabilities").struct.field(x) for x in LABELS]),
        locale=pl.col("metadata_json").str.json_path_match("$.locale"),
        correct=pl.col("selected") == pl.col("outcome"),
    ).with_columns(bin=(pl.col("confidence") * 10).ceil().clip(1, 10).cast(pl.Int32))
    stats = [
        pl.len().alias("n"),
        pl.col("correct").sum(),
        pl.col("confidence").mean().alias("confidence_mean"),
        pl.col("confidence").quantile(0.95, "linear").alias("confidence_p95"),
        pl.col("latency_ms").mean().alias("latency_mean"),
        pl.col("latency_ms").quantile(0.95, "linear").alias("latency_p95"),
    ]
    overall, segments, bins, ids = pl.collect_all([
        scan.select(stats),
        scan.group_by("locale").agg(stats),
        scan.group_by("locale", "bin").agg(pl.len(), pl.col("correct").sum(),
                                          pl.col("confidence").sum()),
        scan.select(pl.col("id").n_unique()),
    ])
    print(overall["n"].item(), segments.height, bins.height, ids.item())


if __name__ == "__main__":
    main()
