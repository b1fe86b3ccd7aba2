"""Windows of production records by their `timestamp` (`monitor.window`: 1h, 6h, 1d, 7d).

A window is named by its start in UTC: `2026-11-04` for day and week windows (weeks start
on Monday), `2026-11-04T06:00Z` for hour windows; names sort in time order. Windows are
aligned to the UTC clock (6h windows start at 00, 06, 12 and 18 h), so every run and every
machine puts a record in the same window. A record without a timestamp has no window (the
name `""`): a monitor reports it as an error, or windows it by when it was read when the
contract says so (`monitor.without_timestamp: arrival`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

WINDOWS = {"1h": "1h", "6h": "6h", "1d": "1d", "7d": "1w"}  # contract name -> polars duration
DEFAULT_WINDOW = "1d"
NO_WINDOW = ""
_DAY_FORMAT, _HOUR_FORMAT = "%Y-%m-%d", "%Y-%m-%dT%H:%MZ"


def _every(window: str) -> str:
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window!r} (one of {', '.join(WINDOWS)})")
    return WINDOWS[window]


def _format(window: str) -> str:
    return _HOUR_FORMAT if window.endswith("h") else _DAY_FORMAT


def window_names(timestamps: pl.Expr, window: str) -> pl.Expr:
    """The name of each timestamp's window (`NO_WINDOW` where it is null)."""
    starts = timestamps.dt.convert_time_zone("UTC").dt.truncate(_every(window))
    return starts.dt.strftime(_format(window)).fill_null(NO_WINDOW)


def window_of(moment: datetime, window: str) -> str:
    """The name of the window holding `moment` (a timezone-aware time)."""
    frame = pl.DataFrame({"t": [moment.astimezone(UTC)]},
                         schema={"t": pl.Datetime("us", "UTC")})
    name: str = frame.select(window_names(pl.col("t"), window))["t"][0]
    return name


def window_start(name: str) -> datetime:
    """The start of the window called `name`, in UTC."""
    shape = _HOUR_FORMAT if "T" in name else _DAY_FORMAT
    return datetime.strptime(name, shape).replace(tzinfo=UTC)


def window_length(window: str) -> timedelta:
    return {"1h": timedelta(hours=1), "6h": timedelta(hours=6), "1d": timedelta(days=1),
            "7d": timedelta(days=7)}[window]
