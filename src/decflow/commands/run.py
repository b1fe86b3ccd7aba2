"""`decflow run CONTRACT INPUT`: one decision through the contract's policy."""

from __future__ import annotations

import json

import typer

from decflow.commands import common
from decflow.commands.common import check_format


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_command(
        contract: str = typer.Argument(..., help="Contract with a 'policy' section."),
        value: str = typer.Argument(..., metavar="INPUT", help="Input text (or JSON object)."),
        backend: str = common.BACKEND_OPTION,
        input_json: bool = typer.Option(False, "--input-json", help="INPUT is a JSON object."),
        case_id: str = typer.Option("runtime", "--id", help="Case id the decision carries."),
        fmt: str = common.FORMAT_OPTION,
        healthcheck: bool = common.HEALTHCHECK_OPTION,
    ) -> None:
        """Decide one input and print the policy's action (fallback is never called)."""
        from decflow.sdk import DecisionGuard, parse_input

        check_format(fmt)
        with DecisionGuard.from_contract(contract, backend=backend,
                                         check_health=healthcheck) as guard:
            decision = guard.decide(parse_input(value, input_json), case_id=case_id)
        if fmt == "json":
            typer.echo(json.dumps(decision.to_dict(), indent=2, ensure_ascii=False))
            return
        from decflow.untrusted import escape

        target = f" -> {decision.fallback_backend}" if decision.fallback_backend else ""
        typer.echo(escape(
            f"{decision.action}{target} · selected {decision.result['selected']} · confidence "
            f"{decision.result['confidence']:.3f} · route {decision.route_index}"
        ))
