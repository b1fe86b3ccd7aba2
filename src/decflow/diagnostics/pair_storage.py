"""A run's persona pairs as a stored table, read back by the summary instead of rebuilt.

One table holds every row the analysis needs: the pairs (`kind` cross or placebo, as
`PairSet.frame()` gives them), each case's base persona (`kind` "base": case id, arm
fingerprint and input) and the cases that took no persona (`kind` "skipped", the reason in
`status`). The small rest (language, catalogue identity, template, pools, axes not
exercised, and the settings that drew the pairs) travels as JSON beside it.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from decflow.diagnostics.personas import PAIR_SCHEMA, PairSet, PersonaPair

BASE, SKIPPED = "base", "skipped"


def _rows(kind: str, case_ids: list[str], **columns: list[Any]) -> pl.DataFrame:
    n = len(case_ids)
    values: dict[str, list[Any]] = {name: [""] * n for name in PAIR_SCHEMA}
    values.update(kind=[kind] * n, case_id=case_ids, changed=[[] for _ in range(n)], **columns)
    return pl.DataFrame(values, schema=PAIR_SCHEMA)


def pair_table(pairs: PairSet) -> pl.DataFrame:
    """Pairs, base personas and skipped cases in one table (see the module docstring)."""
    bases = list(pairs.bases.items())
    skipped = pairs.skipped
    return pl.concat([
        pairs.frame(),
        _rows(BASE, [case for case, _ in bases],
              fingerprint_a=[fp for _, (fp, _) in bases],
              input_a=[json.dumps(value, ensure_ascii=False, sort_keys=True)
                       for _, (_, value) in bases]),
        _rows(SKIPPED, [item["case_id"] for item in skipped],
              status=[item["reason"] for item in skipped]),
    ], how="vertical")


def pair_meta(pairs: PairSet) -> dict[str, Any]:
    return {
        "language": pairs.language,
        "catalogue_version": pairs.catalogue_version,
        "catalogue_sha256": pairs.catalogue_sha256,
        "template": pairs.template,
        "not_exercised": dict(pairs.not_exercised),
        "pools": {axis: list(ids) for axis, ids in pairs.pools.items()},
    }


def pairs_from(table: pl.DataFrame, meta: dict[str, Any]) -> PairSet:
    """The `PairSet` a stored table and its metadata describe."""
    kind = pl.col("kind")
    pairs = [
        PersonaPair(
            axis=row["axis"], pair_id=row["pair_id"], case_id=row["case_id"],
            kind=row["kind"], input_a=json.loads(row["input_a"]),
            input_b=json.loads(row["input_b"]), group_a=row["group_a"],
            group_b=row["group_b"], entry_a=row["entry_a"], entry_b=row["entry_b"],
            status=row["status"], changed=tuple(row["changed"]),
            fingerprint_a=row["fingerprint_a"], fingerprint_b=row["fingerprint_b"],
        )
        for row in table.filter(~kind.is_in([BASE, SKIPPED])).iter_rows(named=True)
    ]
    bases = {
        row["case_id"]: (row["fingerprint_a"], json.loads(row["input_a"]))
        for row in table.filter(kind == BASE).iter_rows(named=True)
    }
    skipped = [{"case_id": row["case_id"], "reason": row["status"]}
               for row in table.filter(kind == SKIPPED).iter_rows(named=True)]
    return PairSet(
        language=meta["language"], catalogue_version=meta["catalogue_version"],
        catalogue_sha256=meta["catalogue_sha256"], template=meta["template"], pairs=pairs,
        skipped=skipped, not_exercised=dict(meta["not_exercised"]),
        pools={axis: list(ids) for axis, ids in meta["pools"].items()}, bases=bases,
    )
