"""The command's start-up: no cyclic collection while it imports, the defaults back once its
first stage runs; a library import touches nothing."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from decflow import startup

REFUND = Path(__file__).resolve().parents[2] / "contracts" / "refund"


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    startup.end()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector")
def test_begin_raises_the_first_threshold_and_end_restores_it_once() -> None:
    gc.set_threshold(700, 10, 10)
    startup.begin()
    startup.begin()  # a second call keeps the first call's defaults
    assert gc.get_threshold() == (startup.STARTING_THRESHOLD, 10, 10)
    startup.end()
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(500, 10, 10)
    startup.end()  # the start-up is over: nothing changes any more
    assert gc.get_threshold() == (500, 10, 10)


def test_importing_decflow_leaves_the_collector_alone() -> None:
    script = ("import gc\n"
              "before = gc.get_threshold()\n"
              "import decflow, decflow.cli, decflow.sdk\n"
              "assert gc.get_threshold() == before, gc.get_threshold()\n"
              "assert gc.get_freeze_count() == 0\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_a_command_restores_the_collector_at_its_first_stage(tmp_path: Path) -> None:
    # the first threshold before and after each stage of a `decflow test` run as the command
    # runs it
    script = ("import gc, sys\n"
              "import decflow.pipeline.stage as stage\n"
              "seen = []\n"
              "run = stage.run_stage\n"
              "def watched(s, c):\n"
              "    seen.append(gc.get_threshold()[0])\n"
              "    result = run(s, c)\n"
              "    seen.append(gc.get_threshold()[0])\n"
              "    return result\n"
              "stage.run_stage = watched\n"
              "def at_exit(): return 'thresholds', [seen[0], *sorted(set(seen[1:]))]\n")
    line = _watched_refund_run(script, "thresholds", tmp_path)
    # the start-up's threshold up to the first stage, the default from it on
    assert line == f"thresholds [{startup.STARTING_THRESHOLD}, {gc.get_threshold()[0]}]"


def test_the_first_stage_freezes_the_start_up_heap_before_any_collection(
    tmp_path: Path,
) -> None:
    # young-generation collections at the first stage's entry and when its work begins: the
    # start-up's objects, all young, are frozen before the thresholds come back, so none
    # walks them (it took 25 ms)
    script = ("import gc, sys\n"
              "import decflow.pipeline.stage as stage\n"
              "seen = []\n"
              "run, inner = stage.run_stage, stage._run_stage\n"
              "def watched(s, c):\n"
              "    if not seen:\n"
              "        seen.append(gc.get_stats()[0]['collections'])\n"
              "    return run(s, c)\n"
              "def working(s, c):\n"
              "    if len(seen) == 1:\n"
              "        seen.append(gc.get_stats()[0]['collections'])\n"
              "        seen.append(gc.get_freeze_count() > 0)\n"
              "    return inner(s, c)\n"
              "stage.run_stage, stage._run_stage = watched, working\n"
              "def at_exit(): return 'collections', *seen\n")
    line = _watched_refund_run(script, "collections", tmp_path)
    _, entered, working, frozen = line.split()
    assert (entered, frozen) == (working, "True")


def _watched_refund_run(script: str, label: str, tmp_path: Path) -> str:
    """The line starting with `label` that a `decflow test` of the refund contract prints at
    exit, run as the command runs it with `script`'s `watched` in place of `run_stage`
    (what its `at_exit()` returns is printed at exit)."""
    script += ("import decflow.pipeline.driver as driver\n"
               "driver.run_stage = watched\n"
               "import atexit\n"
               "atexit.register(lambda: print(*at_exit()))\n"
               "from decflow.__main__ import main\n"
               "sys.argv = ['decflow', *sys.argv[1:]]\n"
               "main()\n")
    done = subprocess.run(
        [sys.executable, "-c", script, "test", str(REFUND / "decflow.yaml"), "--no-prefect",
         "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(label)]
    return line
