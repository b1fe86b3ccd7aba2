"""The calibration lines every view shows beside the binned ECE (report key `calibration`):
the ECE's noise floor at this n (and the `max_ece` limits it makes noise-dominated),
SmoothECE with its bandwidth, and the CORP decomposition of the top-label Brier score.
Reports without the key (older runs) show nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from decflow.gates.headline import number
from decflow.report.model import BinnedEce, Calibration

if TYPE_CHECKING:
    from decflow.report.diff_report import DiffCalibration


def calibration_lines(section: Calibration | None) -> list[str]:
    """Plain sentences, one per part (views add their own markup)."""
    if section is None:
        return []
    lines = []
    binned = section.binned_ece or BinnedEce()
    floor = binned.noise_floor
    if floor:
        line = (f"binned ECE noise floor at n={section.n}: median {number(floor.median)}, "
                f"95% {number(floor.p95)} (a perfectly calibrated model)")
        dominated = [g for g in binned.gates if g.noise_dominated]
        if dominated:
            named = ", ".join(f"max_ece {g.limit:g} ({g.level})" for g in dominated)
            line += f"; noise-dominated: {named}"
        lines.append(line)
    smooth = section.smooth_ece
    if smooth:
        value = (f"{number(smooth.value)}" if smooth.value is not None
                 else f"< {number(smooth.below)}")
        lines.append(f"SmoothECE {value} (bandwidth {number(smooth.bandwidth)})")
    corp = section.corp
    if corp:
        lines.append(f"Brier (top label) {number(corp.brier)} = miscalibration "
                     f"{number(corp.miscalibration)} − discrimination "
                     f"{number(corp.discrimination)} + uncertainty "
                     f"{number(corp.uncertainty)} (CORP)")
    return lines


def diff_calibration_lines(section: DiffCalibration | None) -> list[str]:
    """The diff's binned ECE noise floors: each run's, and the increase's."""
    if section is None:
        return []
    parts = [f"{name} {number(side.noise_floor.p95)}"
             for name, side in (("baseline", section.baseline), ("candidate", section.candidate))
             if side is not None and side.noise_floor is not None]
    if section.increase_noise_floor is not None:
        parts.append(f"increase {number(section.increase_noise_floor.p95)}")
    if not parts:
        return []
    line = "ECE noise floors (95%, a perfectly calibrated model): " + ", ".join(parts)
    dominated = [g for g in section.gates if g.noise_dominated]
    if dominated:
        line += "; noise-dominated: " + ", ".join(
            f"max_ece_increase {g.limit:g} ({g.level})" for g in dominated)
    return [line]
