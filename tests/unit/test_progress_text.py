"""The progress line of long stages (terminal and Prefect progress artifact): calls done of
the total, the rate so far and the time left at that rate."""

from __future__ import annotations

from decflow.views.progress_text import duration, progress_line


def test_a_running_stage_shows_share_rate_and_time_left() -> None:
    # 11 of 132 calls in 2 s: 5.5 calls/s, 121 left take 22 s
    assert progress_line(11, 132, 2.0, "calls", "results") == (
        "results: 11/132 calls (8%) · 5.5 calls/s · ETA 22 s")
    assert progress_line(40, 132, 600.0, "calls") == (
        "40/132 calls (30%) · 0.06667 calls/s · ETA 23 min")


def test_a_finished_stage_says_how_long_it_took_and_an_unknown_total_shows_the_rate() -> None:
    assert progress_line(132, 132, 75.0, "calls") == (
        "132/132 calls (100%) · 1.76 calls/s · done in 1 min 15 s")
    assert progress_line(0, 132, 0.0, "calls") == "0/132 calls (0%) · 0 calls/s"
    assert progress_line(5000, None, 2.0, "records") == "5000 records · 2500 records/s"


def test_durations_read_in_the_largest_units() -> None:
    assert [duration(s) for s in (0.4, 59.6, 60, 125, 3600, 3_780)] == [
        "0 s", "1 min", "1 min", "2 min 5 s", "1 h", "1 h 3 min"]
