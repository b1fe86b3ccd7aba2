"""What a regression diff is judged by: the gating rule and the rerun noise.

- `gating_rule`: `point` (DecGuard's observed-difference verdicts) for DecGuard report
  files, DecGuard 0.1 contracts (no decflow extension) and `regression.gating: point`;
  `evidence` for contracts that use any decflow extension or set `regression.gating:
  evidence`. The reason is said in the report.
- `side_reruns`: the rerun noise the store holds for each side (stability reruns, noise
  runs), after making the candidate's noise run when `--noise-reruns K` asks for one and
  the candidate has no reruns yet (`candidate_noise`, which a Prefect flow runs as a task
  of its own before the diff, so its calls have their progress).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decflow.contracts.extensions import gating_rule as contract_gating
from decflow.contracts.gates import Gating
from decflow.errors import DecflowError
from decflow.pipeline.noise import Reruns, make_noise_run, run_reruns
from decflow.pipeline.stage import ProgressFactory
from decflow.report.versions import DECGUARD_REPORT_VERSION
from decflow.store.runs import REPORT, read_run_json
from decflow.store.store import Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract


def gating_rule(contract: Contract | None, reports: tuple[dict[str, Any], dict[str, Any]]
                ) -> tuple[Gating, str]:
    """(gating, why) for a diff of `reports` gated by `contract` (None: no contract)."""
    if any(r.get("report_version") == DECGUARD_REPORT_VERSION for r in reports):
        return "point", "a DecGuard 0.1 report keeps DecGuard's point-estimate gates"
    if contract is None:
        return "point", "no contract: DecGuard's point-estimate gates"
    return contract_gating(contract, "regression")


def side_reruns(
    store: Store,
    baseline_run: str | None,
    candidate: tuple[dict[str, Any], str | None],
    width: int,
    *,
    noise_reruns: int = 0,
    progress: ProgressFactory | None = None,
) -> tuple[Reruns, Reruns]:
    """Each side's reruns in `store`; with `noise_reruns`, the candidate's noise run is
    made (or resumed) first when the candidate has none."""
    report, candidate_run = candidate
    after = run_reruns(store, candidate_run, width)
    if noise_reruns and not after.by_case:
        if candidate_run is None:
            raise DecflowError(
                "--noise-reruns re-sends the candidate run's stored requests, but the "
                f"candidate is not a run in the store {store.url}; pass its run id and "
                "--store"
            )
        make_noise_run(store, report, candidate_run, noise_reruns, progress=progress)
        after = run_reruns(store, candidate_run, width)
    return run_reruns(store, baseline_run, width), after


def candidate_noise(store: Store, candidate_run: str, noise_reruns: int,
                    progress: ProgressFactory | None = None) -> str | None:
    """The noise run a diff of stored run `candidate_run` with `noise_reruns` makes first
    (made, resumed or reused; see `side_reruns`), or None when it needs none (no
    `noise_reruns`, or the run has reruns of its own)."""
    report = read_run_json(store, candidate_run, REPORT)
    width = len((report.get("contract") or {}).get("labels") or ())
    if not noise_reruns or run_reruns(store, candidate_run, width).by_case:
        return None
    return make_noise_run(store, report, candidate_run, noise_reruns, progress=progress)
