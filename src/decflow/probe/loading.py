"""What `decflow probe` reads from the command line: the inputs file (the agent is loaded
in its worker process, `decflow.probe.agents.AgentProcess`)."""

from __future__ import annotations

from pathlib import Path

from decflow.errors import DecflowError
from decflow.probe.runner import check_inputs


def read_inputs(path: str) -> list[str]:
    """One input per line (UTF-8); blank lines are left out; duplicates are refused."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot read the inputs ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DecflowError(f"{path}: the inputs file must be UTF-8") from None
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not numbered:
        raise DecflowError(f"{path}: no inputs (one input per line)")
    lines: dict[str, int] = {}
    for number, line in numbered:
        if line in lines:
            raise DecflowError(
                f"{path}: line {number} repeats line {lines[line]} ({line[:60]!r}); inputs must "
                "be distinct, because a copy counts one answer twice in the blindness skew"
            )
        lines[line] = number
    return check_inputs([line for _, line in numbered], path)
