"""The call stage's preparation: a health check when asked for, the model's identity when
the call cache is on, and otherwise nothing at all (no backend built before the calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from decflow.backends.base import Backend, DecisionRequest, Health, Prediction
from decflow.pipeline.contract_run import results
from decflow.pipeline.spec import RunSpec

REFUND = Path(__file__).resolve().parents[2] / "contracts" / "refund" / "decflow.yaml"


class _Healthy(Backend):
    provider = "healthy"

    async def predict(self, request: DecisionRequest) -> Prediction:
        raise AssertionError("no call before the calls")

    async def healthcheck(self) -> Health:
        return Health("ok", "fine")


def _spec(tmp_path: Path, **settings: Any) -> RunSpec:
    return RunSpec(contract_path=str(REFUND), store_url=str(tmp_path / "store"),
                   run_id="r1", **settings)


def test_without_health_check_or_call_cache_no_backend_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def build(_contract: object, name: str) -> Backend:
        built.append(name)
        return _Healthy(name, "m")

    monkeypatch.setattr(results, "build_backend", build)
    assert results.prepare_calls(_spec(tmp_path, healthcheck=False)) is None
    assert built == []
    assert results.prepare_calls(_spec(tmp_path)) == {"status": "ok", "detail": "fine"}
    assert built == ["default"]
