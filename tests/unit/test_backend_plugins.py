"""Entry-point plugins: a real (temporary) installed distribution registers backends."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from decflow.backends.base import Backend, BackendUnavailable, DecisionSpec
from decflow.backends.engine import RemoteCaller, error_kind
from decflow.backends.plugins import load_plugin_backend
from decflow.errors import ConfigurationError

SPEC = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"))

PLUGIN = '''
from decflow.backends.base import Backend, BackendUnavailable, Prediction


class FixedBackend(Backend):
    provider = "fixedplug"

    @classmethod
    def from_config(cls, config, *, name, decision):
        if "answer" not in config:
            raise ValueError("'answer' is required")
        backend = cls(name, config.get("model"))
        backend.answer = config["answer"]
        return backend

    async def predict(self, request):
        if request.input == "boom":
            raise RuntimeError("boom")
        if request.input == "down":
            raise BackendUnavailable("down for maintenance")
        return Prediction({label: float(label == self.answer)
                           for label in request.decision.labels})


class NotABackend:
    @classmethod
    def from_config(cls, config, *, name, decision):
        return cls()


class ReturnsJunk(Backend):
    @classmethod
    def from_config(cls, config, *, name, decision):
        return {"not": "a backend"}

    async def predict(self, request):
        raise NotImplementedError
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "df_test_plugin.py").write_text(PLUGIN)
    info = tmp_path / "df_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: df-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [decflow.backends]
        fixedplug = df_test_plugin:FixedBackend
        notabackend = df_test_plugin:NotABackend
        junk = df_test_plugin:ReturnsJunk
        broken = df_missing_module_xyz:Thing
        """))
    monkeypatch.syspath_prepend(str(tmp_path))


def run_inputs(backend: Backend, inputs: list[str]) -> list[dict[str, Any]]:
    requests = pl.DataFrame({
        "request_id": [f"r{i}" for i in range(len(inputs))], "input_text": inputs,
        "input_json": [None] * len(inputs), "shown_labels": [list(SPEC.labels)] * len(inputs),
        "label_order": [[0, 1, 2]] * len(inputs),
    }, schema_overrides={"input_json": pl.String})
    chunks: list[pl.DataFrame] = []
    asyncio.run(RemoteCaller(backend, SPEC, 0.001, 4).run(requests, SPEC.labels, chunks.append))
    return sorted(pl.concat(chunks).to_dicts(), key=lambda row: row["request_id"])


def test_plugin_is_built_from_its_config_and_errors_get_their_kinds(installed: None) -> None:
    config = {"provider": "fixedplug", "model": "fx-1", "answer": "reject"}
    backend = load_plugin_backend("fixedplug", config, name="candidate", decision=SPEC)
    assert (backend.name, backend.model) == ("candidate", "fx-1")
    ok, boom, down = run_inputs(backend, ["fine", "boom", "down"])
    assert ok["selected"] == "reject" and ok["error_kind"] is None
    assert (boom["error_kind"], boom["error_message"]) == ("exception", "RuntimeError: boom")
    assert (down["error_kind"], down["error_message"]) == ("unavailable", "down for maintenance")


@pytest.mark.parametrize(
    ("provider", "config", "message"),
    [
        ("fixedplug", {}, "invalid configuration: ValueError: 'answer' is required"),
        ("notabackend", {}, "is not a subclass of decflow.backends.base.Backend"),
        ("junk", {}, "from_config returned dict, not a Backend"),
        ("broken", {}, "failed to import: ModuleNotFoundError"),
        ("nosuchplug", {}, "unknown provider 'nosuchplug'"),
    ],
)
def test_plugin_load_problems_are_configuration_errors(
    installed: None, provider: str, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as exc:
        load_plugin_backend(provider, {"provider": provider, **config}, name="default",
                            decision=SPEC)
    assert message in str(exc.value)


def test_error_kind() -> None:
    assert error_kind(BackendUnavailable("gone")) == ("unavailable", "gone")
    assert error_kind(RuntimeError("boom")) == ("exception", "RuntimeError: boom")
