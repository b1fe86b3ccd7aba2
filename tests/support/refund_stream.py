"""The generator of partitioned refund records (`scripts/refund_records.py`), loaded as a
module so tests write small streams in-process, as the script's command line does."""

from __future__ import annotations

import importlib.util
import sys
from datetime import date
from pathlib import Path
from types import ModuleType

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "refund_records.py"
CONTRACT = ROOT / "contracts" / "refund-monitor" / "decflow.yaml"
START = date(2026, 11, 1)


def generator() -> ModuleType:
    """The script as a module (loaded once)."""
    name = "refund_records_script"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def write_stream(out: Path, *args: str) -> None:
    """Run the script's command line `OUT ARGS…` in this process: `out/records`,
    `out/labels` and `out/baseline`."""
    generator().main([str(out), *args])
