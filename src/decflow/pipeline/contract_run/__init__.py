"""The contract-run pipeline (test / fuzz / all / stability): cases → requests → results →
comparisons → minimized → summary → report, and the in-process runner that drives it."""
