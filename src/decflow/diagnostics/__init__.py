"""Diagnostics that say whether a suite's results can be trusted, before reading them.

- ``stability``: rerun meter (disjoint rerun pairs, case-level tri-state against ε, oracle advice)
- ``blindness``: modal-label skew of first draws; marks passes of a blind suite as vacuous
- ``catalogue`` / ``personas`` / ``render``: seeded single-axis persona pairs from the
  versioned catalogues (``decflow.catalogue``), with placebo partners and a diff check
- ``counterfactual``: per-axis excess of cross-group over placebo flips by case, verdicts
  (Holm on both sides) and the direction test

Statistics live in ``decflow.metrics`` (``bounded_mean``, ``case_rates``, ``stats``).
"""
