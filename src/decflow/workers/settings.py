"""The per-call timeout of code decflow runs but does not own (plugin backends, probe
agents, SDK callables): `DECFLOW_CALL_TIMEOUT` seconds, 120 by default. A plugin backend
that calls a remote service keeps its own, shorter timeouts; this one is the backstop
against a call that never returns."""

from __future__ import annotations

import math
import os

from decflow.errors import DecflowError

CALL_TIMEOUT_ENV = "DECFLOW_CALL_TIMEOUT"
DEFAULT_CALL_TIMEOUT_S = 120.0


def call_timeout(value: float | None = None) -> float:
    """`value` when given, else the environment's setting, else the default (seconds)."""
    if value is None:
        text = os.environ.get(CALL_TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_CALL_TIMEOUT_S
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        where = f"{CALL_TIMEOUT_ENV}={text!r}"
    else:
        where = f"call timeout {value!r}"
    if not math.isfinite(value) or value <= 0:
        raise DecflowError(f"{where}: give the per-call timeout as seconds > 0")
    return float(value)
