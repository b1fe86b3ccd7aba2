"""One progress line for long stages, the same on the terminal and in the Prefect progress
artifact: `40/132 calls (30%) · 12.3 calls/s · ETA 8 s` (with a stage name before it in the
artifact and the run's log: `results: 40/132 calls …`)."""

from __future__ import annotations

from decflow.gates.headline import number


def duration(seconds: float) -> str:
    """`8 s`, `2 min 5 s`, `1 h 3 min`."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def progress_line(done: int, total: int | None, elapsed_s: float, unit: str,
                  stage: str = "") -> str:
    """Where a stage is: done of total (unknown total: done alone), the rate so far and,
    with a total, the time left at that rate."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    speed = f"{number(rate)} {unit}/s"
    named = f"{stage}: " if stage else ""
    if total is None:
        return f"{named}{done} {unit} · {speed}"
    share = f"{100 * done // total}%" if total else "100%"
    parts = [f"{named}{done}/{total} {unit} ({share})", speed]
    if done >= total:
        parts.append(f"done in {duration(elapsed_s)}")
    elif rate > 0:
        parts.append(f"ETA {duration((total - done) / rate)}")
    return " · ".join(parts)
