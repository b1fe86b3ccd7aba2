"""Errors that stop a command with exit code 2 ("the check could not run").

Every message names the place (file, line or row, field) and, where it helps, what to do.
Messages quote untrusted text (file contents, keys, paths), so control and bidi characters
in them are shown escaped (`decflow.untrusted`) whoever built the message.
Per-case backend failures are not errors in this sense: they become typed error rows.
"""

from __future__ import annotations

from decflow.untrusted import escape, shorten

MAX_PROBLEM_CHARS = 500


class DecflowError(Exception):
    """A problem that prevents a check from running; the CLI prints `error: <message>`."""

    def __init__(self, message: str) -> None:
        message = escape(message, keep_newlines=True)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ContractError(DecflowError):
    """An invalid contract: `<file>: invalid contract:` followed by one line per problem
    (each kept on one line, and cut when a quoted value makes it very long)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = [escape(p) for p in problems]
        lines = "\n".join(f"  {shorten(p, MAX_PROBLEM_CHARS)}" for p in self.problems)
        super().__init__(f"{source}: invalid contract:\n{lines}")


class DatasetError(DecflowError):
    """An invalid golden dataset or production record file (names file and line/row)."""


class ReportError(DecflowError):
    """A stored report or run that does not verify."""


class ConfigurationError(DecflowError):
    """A backend or paraphraser configuration problem found while running (exit 2)."""
