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

    def about_run(self, run_id: str, resume: str | None, *, kept: bool = True) -> None:
        """Name the run this error stopped (recorded `failed`) and how to finish it; a run
        not `kept` (it failed before anything worth resuming) is to be run again."""
        if not kept:
            self.message += "; nothing of the run was kept: fix that, then run the command again"
            return
        if f"run {run_id}" not in self.message:
            self.message = f"run {run_id} failed: {self.message}"
        if resume:
            self.message += f"; fix that, then finish the run with `{escape(resume)}`"


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


class Interrupted(BaseException):
    """The command was stopped by a signal (`signum`: SIGINT 2, SIGTERM 15); the command
    line exits 128 + signum. `resume` is the command that finishes the run it left
    resumable, `run_id` that run (both None when no run was being worked on).

    A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it, but not
    a KeyboardInterrupt: the command-line framework would turn that into a silent exit."""

    def __init__(self, signum: int = 2, run_id: str | None = None,
                 resume: str | None = None) -> None:
        super().__init__(signum)
        self.signum, self.run_id, self.resume = signum, run_id, resume
