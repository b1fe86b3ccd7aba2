"""The switch interval asked by overlapping blocks of several threads (`decflow.switching`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from decflow.switching import switch_interval


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    found = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(found)


def test_a_block_sets_the_interval_and_puts_back_what_it_found() -> None:
    with switch_interval(0.001):
        assert sys.getswitchinterval() == pytest.approx(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_blocks_ending_out_of_order_keep_the_shortest_open_and_restore_at_the_last() -> None:
    # a run's first wave (one thread) ends while the work ahead (another) still runs
    wave, ahead = switch_interval(0.001), switch_interval(0.0005)
    wave.__enter__()
    ahead.__enter__()
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    wave.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(0.0005)  # not Python's 5 ms again
    ahead.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_longer_block_ending_last_gets_its_own_interval_back_in_between() -> None:
    outer = switch_interval(0.002)
    outer.__enter__()
    with switch_interval(0.0005):
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    assert sys.getswitchinterval() == pytest.approx(0.002)
    outer.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_blocks_in_threads_restore_the_interval_once_all_have_ended() -> None:
    entered = threading.Barrier(3)
    leave = threading.Event()

    def block(seconds: float) -> None:
        with switch_interval(seconds):
            entered.wait()
            leave.wait()

    threads = [threading.Thread(target=block, args=(s,)) for s in (0.001, 0.0002)]
    for thread in threads:
        thread.start()
    entered.wait()
    assert sys.getswitchinterval() == pytest.approx(0.0002)
    leave.set()
    for thread in threads:
        thread.join()
    assert sys.getswitchinterval() == pytest.approx(0.005)
