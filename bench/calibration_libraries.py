"""SmoothECE and CORP: decflow's numpy code against `relplot` and `model-diagnostics` (issue 23).

Exactness on the fixed vectors is in the test suite (tests/unit/test_calibration.py against
the packages' recorded outputs); this measures speed on large inputs and reports the values
side by side. Run it in a throwaway environment that has both packages (they are not
decflow dependencies):

    python3 -m venv /tmp/calibration-venv
    /tmp/calibration-venv/bin/pip install relplot==1.0.3 model-diagnostics==1.5.0
    PYTHONPATH=src /tmp/calibration-venv/bin/python bench/calibration_libraries.py --rows 10000000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from decflow.metrics.calibration import corp
from decflow.metrics.smooth_ece import (
    PRODUCTION_NODES,
    CalibrationGrid,
    grids_of,
    smooth_ece,
    stored_grid,
)


def timed(label: str, run: Callable[[], Any]) -> Any:
    """Prints wall and CPU seconds (the machine may be shared: CPU is the fair figure)."""
    started, cpu = time.perf_counter(), time.process_time()
    value = run()
    print(f"{label:<58} wall {time.perf_counter() - started:7.2f} s  "
          f"CPU {time.process_time() - cpu:7.2f} s   {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--corp-rows", type=int, default=1_000_000)
    rows = parser.parse_args().rows
    corp_rows = parser.parse_args().corp_rows
    rng = np.random.default_rng(0)
    f = rng.uniform(0.4, 1.0, rows)
    y = (rng.random(rows) < f ** 1.2).astype(np.float64)
    timed("decflow smooth_ece (records in memory)", lambda: smooth_ece(grids_of(f, y)).value)

    def partitioned() -> float | None:
        parts = [CalibrationGrid.of(f[i::10], y[i::10], PRODUCTION_NODES) for i in range(10)]
        grid = parts[0]
        for part in parts[1:]:
            grid = grid.merge(part)
        return smooth_ece(stored_grid(grid)).value

    timed("decflow smooth_ece (10 partitions, merged 1,001-node grids)", partitioned)
    import relplot

    timed("relplot 1.0.3 smECE", lambda: float(relplot.smECE(f, y)))
    fc, yc = f[:corp_rows], y[:corp_rows]
    timed(f"decflow corp ({corp_rows:,} rows)",
          lambda: {k: round(v, 6) for k, v in corp(fc, yc).items() if k != "curve"})  # type: ignore[union-attr]
    from model_diagnostics.scoring import SquaredError, decompose

    timed(f"model-diagnostics 1.5.0 decompose ({corp_rows:,} rows)",
          lambda: decompose(yc, fc, scoring_function=SquaredError()).row(0, named=True))


if __name__ == "__main__":
    main()
