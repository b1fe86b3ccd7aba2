"""The file formats a report is written in besides the terminal text and JSON: one registry
entry per format, declaring its renderer, its command-line option (`--<name> FILE`) and the
report kinds it shows. The commands' output options are made from the registry, which
closes then (`decflow.registry`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from decflow.registry import Registry

if TYPE_CHECKING:  # the command line reads the registry for its options without pydantic
    from decflow.report.model import Report

# The report kinds with gates to show (a probe report has relations instead).
GATED_KINDS = frozenset({"run", "check", "diff", "replay", "monitor"})


@dataclass(frozen=True)
class ViewFormat:
    """`name` is the option's Python name (`--<name with dashes> FILE`); `renderer` is
    `module:function`, a function of the typed report (`report.kinds.view_model`: it
    dispatches on the model's type) returning the file's text, imported
    when a file is written (the command line starts without it); `what` names the file in
    messages; `kinds` are the report kinds it describes."""

    name: str
    renderer: str
    what: str
    help: str
    kinds: frozenset[str] = GATED_KINDS

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"view format {self.name!r}: the name must be a Python identifier")

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def render(self, report: Report) -> str:
        module, _, function = self.renderer.partition(":")
        render: Callable[[Report], str] = getattr(importlib.import_module(module), function)
        return render(report)


VIEW_FORMATS: Registry[ViewFormat] = Registry("view format", lambda found: found.name)
for _format in (
    ViewFormat("html", "decflow.views.html:render_html", "HTML report",
               "Also write the HTML report here."),
    ViewFormat("junit", "decflow.views.junit:render_junit", "JUnit report",
               "Also write JUnit XML here."),
    ViewFormat("markdown", "decflow.views.markdown:render_markdown", "Markdown report",
               "Also write Markdown here."),
):
    VIEW_FORMATS.register(_format)
