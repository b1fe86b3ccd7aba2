"""SmoothECE, CORP and the binned ECE's noise floor against the reference packages' own
outputs (recorded in tests/fixtures/relplot/ from relplot 1.0.3 and model-diagnostics 1.5.0
on fixed vectors), partitions merged against one pass, and the floor's flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decflow.metrics.calibration import corp, diff_calibration, noise_dominated, noise_floor
from decflow.metrics.golden_metrics import reliability
from decflow.metrics.smooth_ece import (
    PRODUCTION_NODES,
    CalibrationGrid,
    grids_of,
    smooth_ece,
    smooth_ece_at,
    stored_grid,
)
from tests.support.paths import FIXTURES

SMECE = json.loads((FIXTURES / "relplot" / "smece.json").read_text())["cases"]
CORP = {c["name"]: c for c in json.loads((FIXTURES / "relplot" / "corp.json").read_text())["cases"]}


@pytest.mark.parametrize("case", SMECE, ids=[c["name"] for c in SMECE])
def test_smooth_ece_equals_relplot(case: dict) -> None:
    source = grids_of(case["confidence"], case["correct"])
    result = smooth_ece(source)
    assert result.value == pytest.approx(case["smece"], abs=1e-6)
    assert result.bandwidth == pytest.approx(case["bandwidth"], abs=1e-12)
    for sigma, expected in case["smece_at"].items():
        assert smooth_ece_at(source, float(sigma)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("case", SMECE, ids=[c["name"] for c in SMECE])
def test_corp_equals_model_diagnostics(case: dict) -> None:
    got = corp(case["confidence"], case["correct"])
    expected = CORP[case["name"]]
    assert got is not None
    for key in ("miscalibration", "discrimination", "uncertainty"):
        assert got[key] == pytest.approx(expected[key], abs=1e-9)
    assert got["brier"] == pytest.approx(expected["score"], abs=1e-9)
    assert got["brier"] == pytest.approx(
        got["miscalibration"] - got["discrimination"] + got["uncertainty"], abs=1e-12)
    accuracy = [point["accuracy"] for point in got["curve"]]
    assert accuracy == sorted(accuracy)  # the isotonic (CORP) reliability curve


def test_partition_grids_merge_to_the_one_pass_value() -> None:
    rng = np.random.default_rng(4)
    f = rng.uniform(0.3, 1.0, 5000)
    y = rng.random(5000) < f**1.5
    whole = CalibrationGrid.of(f, y, PRODUCTION_NODES)
    parts = [CalibrationGrid.of(f[i::7], y[i::7], PRODUCTION_NODES) for i in range(7)]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    for sigma in (0.01, 0.05, 0.2):
        one = smooth_ece_at(stored_grid(whole), sigma)
        assert one == pytest.approx(smooth_ece_at(grids_of(f, y), sigma), abs=1e-12)
        assert smooth_ece_at(stored_grid(merged), sigma) == pytest.approx(one, rel=1e-12)
    assert smooth_ece(stored_grid(merged)).value == pytest.approx(
        smooth_ece(grids_of(f, y)).value, rel=1e-12)
    with pytest.raises(ValueError):
        whole.merge(CalibrationGrid.of(f, y, 11))


def test_a_stored_grid_says_below_when_smooth_ece_is_finer_than_it_resolves() -> None:
    rng = np.random.default_rng(6)
    f = rng.uniform(0.5, 1.0, 200_000)
    y = rng.random(f.size) < f  # calibrated: smECE ≈ 0.003, below the grid's 0.01
    result = smooth_ece(stored_grid(CalibrationGrid.of(f, y, PRODUCTION_NODES)))
    assert result.value is None and result.below is not None and result.below < 0.02
    assert smooth_ece(grids_of(f, y)).value < result.below


def calibrated_bins(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0.4, 1.0, n)
    bins, _ = reliability(confidence, rng.random(n) < confidence, 10)
    return bins


def test_the_noise_floor_flags_max_ece_005_on_small_suites() -> None:
    for n in (50, 100, 200):
        floor = noise_floor(calibrated_bins(n, n))
        assert noise_dominated(0.05, floor), (n, floor)
    big = noise_floor(calibrated_bins(5000, 1))
    assert not noise_dominated(0.05, big)  # 5,000 cases resolve 0.05
    assert noise_floor([{"count": 0, "mean_confidence": None}]) is None


def test_the_noise_floor_is_seeded_and_exact_for_equal_confidences() -> None:
    bins = calibrated_bins(100, 3)
    assert noise_floor(bins) == noise_floor(bins)
    # One bin of 4 cases at confidence 0.5: ECE = |B − 2| / 4 with B ~ Binomial(4, ½):
    # P(ECE = 0) = 6/16, P(0.25) = 8/16, P(0.5) = 2/16 → median 0.25, 95th percentile 0.5.
    floor = noise_floor([{"count": 4, "mean_confidence": 0.5}], replicates=20_000)
    assert floor is not None and (floor["median"], floor["p95"]) == (0.25, 0.5)


def test_the_increase_floor_flags_a_small_max_ece_increase() -> None:
    section = diff_calibration(calibrated_bins(100, 7), calibrated_bins(100, 8), (0.07, 0.08),
                               {"requirement": 0.02, "warning": 0.5})
    floor = section["increase_noise_floor"]
    assert floor is not None and 0.02 < floor["p95"] < 0.5
    assert [g["noise_dominated"] for g in section["gates"]] == [True, False]
    assert section["baseline"]["noise_floor"]["p95"] > 0.05
