"""The call engine's results table: one row per request, errors nulled, decided rows kept
exactly (a polars release that blanked them would turn a verdict into NaN metrics)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from decflow.backends.engine import _rows_from_matrix

OK = [0.1, 0.2, 0.7]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_decided_rows_keep_their_probabilities_among_errors(order: tuple[int, ...]) -> None:
    rows = [("c1", None, "invalid_response", 5.0), ("c3", OK, None, 6.0),
            ("c2", None, "timeout", 7.0)]
    rows = [rows[i] for i in order]
    matrix = np.array([r[1] if r[1] else [np.nan] * 3 for r in rows])
    frame = _rows_from_matrix([r[0] for r in rows], matrix, ["refund", "reject", "review"],
                              [r[3] for r in rows], [r[2] for r in rows],
                              ["m" if r[2] else None for r in rows], "model", None, None)
    by_id = {row["request_id"]: row for row in frame.to_dicts()}
    assert by_id["c3"]["probabilities"] == OK
    assert (by_id["c3"]["selected"], by_id["c3"]["confidence"]) == ("review", 0.7)
    assert by_id["c3"]["latency_ms"] == 6.0 and by_id["c3"]["error_kind"] is None
    for errored in ("c1", "c2"):
        assert by_id[errored]["probabilities"] is None and by_id[errored]["selected"] is None
