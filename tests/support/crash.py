"""A run killed part way through its calls, in process: the call stage raises after a
number of calls to `results.call_rows`, as a killed process would stop, and is restored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from decflow.pipeline.contract_run import results


def crash_after(monkeypatch: pytest.MonkeyPatch, calls: int, run: Callable[[], Any]) -> None:
    """Run `run` with `results.call_rows` raising RuntimeError("killed") once it has run
    `calls` times; the run must end with that error."""
    real = results.call_rows
    made = {"n": 0}

    def crashing(*args: Any, **kwargs: Any) -> int:
        made["n"] += 1
        if made["n"] > calls:
            raise RuntimeError("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(results, "call_rows", crashing)
    try:
        with pytest.raises(RuntimeError, match="killed"):
            run()
    finally:
        monkeypatch.setattr(results, "call_rows", real)
