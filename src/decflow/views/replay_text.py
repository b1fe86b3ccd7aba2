"""The terminal view of a replay: each stored failure, whether it reproduces, and the
verdict."""

from __future__ import annotations

from typing import Any

from decflow.version import __version__


def render_replay(replay: dict[str, Any]) -> str:
    changed = " (changed since the run)" if replay["contract_changed"] else ""
    lines = [
        f"decflow {__version__} · replay of {replay['source']} · "
        f"{replay['status'].upper()}",
        "",
        f"  contract  {replay['contract_path']}  {replay['contract_hash'][:19]}{changed}",
        f"  backend   {replay['backend']}",
    ]
    if not replay["outcomes"]:
        return "\n".join([*lines, "", replay["message"]]) + "\n"
    lines.append("")
    for outcome in replay["outcomes"]:
        verdict = "reproduces" if outcome["reproduced"] else "holds now"
        lines.append(f"  {outcome['id']}: {verdict} · regenerated from seed: "
                     f"{outcome['regenerated']}")
        if outcome["original_error"]:
            lines.append(f"    original: {outcome['original_error']}")
        for example in outcome["examples"]:
            found = example["error"] or "; ".join(example["violations"]) or "no violation"
            lines.append(f"    {example['kind']:<11} {found}")
    count = sum(o["reproduced"] for o in replay["outcomes"])
    total = len(replay["outcomes"])
    verdict = (f"FAIL: {count} of {total} stored failures reproduce" if count
               else f"PASS: none of {total} stored failures reproduces")
    return "\n".join([*lines, "", verdict]) + "\n"
