"""Write N golden cases: the refund example's 11 cases repeated under new ids.

usage: python bench/make_dataset.py N OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "contracts" / "refund" / "cases.jsonl"


def main() -> None:
    count, target = int(sys.argv[1]), Path(sys.argv[2])
    rows = [json.loads(line) for line in SOURCE.read_text().splitlines() if line.strip()]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w") as out:
        for i in range(count):
            row = dict(rows[i % len(rows)])
            row["id"] = f"c{i}"
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
