"""Files a contract names stay inside the contract's own folder.

A contract from a pull request could name `dataset: /home/ci/.git-credentials`,
`../../.ssh/id_rsa`, or a `cases.csv` that is a symlink to either, and have an error
message print what it read. So a path a contract names (`dataset`, the paraphrase
provider's `path`) must be relative and resolve, symlinks followed, inside the folder that
holds the contract, unless the command line (`--allow-path DIR`) or the environment
(`DECFLOW_ALLOW_PATH`, folders separated by the platform's path separator) widens that to
other folders. A path given on the command line (`-d`) is the user's own and is not
confined.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from decflow.errors import DecflowError
from decflow.untrusted import quote

ALLOW_PATH_ENV = "DECFLOW_ALLOW_PATH"


def allowed_roots(allowed: Sequence[str] = ()) -> list[Path]:
    """The folders outside a contract's own that its paths may name: `allowed` (from the
    command line) and the environment's `DECFLOW_ALLOW_PATH`."""
    listed = [*allowed, *os.environ.get(ALLOW_PATH_ENV, "").split(os.pathsep)]
    return [Path(folder).resolve() for folder in listed if folder]


def contract_file(base_dir: Path, written: str, *, field: str, source: str,
                  allowed: Sequence[str] = ()) -> Path:
    """The file `written` in the contract's field `field`, resolved (symlinks followed), if
    it lies inside the contract's folder `base_dir` (relative paths only) or inside an
    allowed folder; else exit 2 saying so, without reading it."""
    if "\0" in written:  # the contract's check refuses it first; a path from elsewhere too
        raise DecflowError(f"{source}: {field}: {quote(written)} holds a NUL byte; a path "
                           "has none")
    target = Path(written)
    resolved = (base_dir / target).resolve()
    if not target.is_absolute() and resolved.is_relative_to(base_dir.resolve()):
        return resolved
    if any(resolved.is_relative_to(root) for root in allowed_roots(allowed)):
        return resolved
    reason = ("is an absolute path" if target.is_absolute()
              else "leads outside the contract's folder")
    raise DecflowError(
        f"{source}: {field}: {quote(written)} {reason}; a contract names files inside its "
        "own folder. To read from another folder you trust, pass --allow-path DIR (or set "
        f"{ALLOW_PATH_ENV}); or give the file on the command line (-d)"
    )
