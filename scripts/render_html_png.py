#!/usr/bin/env python3
"""Render a decflow HTML report (or a report.json) to a PNG with headless Chromium.

    python scripts/render_html_png.py REPORT.html|report.json OUT.png [--width 1280]
        [--height 2000] [--chromium PATH]

A `.json` input is rendered to HTML first with `decflow.views.html.render_html`.
Chromium runs with networking-related background services off and a throwaway profile, so
the screenshot shows exactly what the self-contained file shows offline. Needs Debian's
`chromium` (`apt-get install -y chromium`) or `--chromium PATH` / `$DECFLOW_CHROMIUM`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120


def find_chromium(explicit: str | None) -> str:
    for name in (explicit, os.environ.get("DECFLOW_CHROMIUM"), *CANDIDATES):
        if name and (found := shutil.which(name)):
            return found
    sys.exit("render_html_png: no Chromium found; install it (`apt-get install -y chromium`) "
             "or pass --chromium PATH")


def html_file(source: Path, workdir: Path) -> Path:
    if source.suffix.lower() != ".json":
        return source.resolve()
    from decflow.views.html import render_html

    target = workdir / (source.stem + ".html")
    target.write_text(render_html(json.loads(source.read_text(encoding="utf-8"))),
                      encoding="utf-8")
    return target


def render(source: Path, out: Path, *, width: int, height: int, chromium: str) -> None:
    with tempfile.TemporaryDirectory(prefix="decflow-png-") as tmp:
        page = html_file(source, Path(tmp))
        out = out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--hide-scrollbars", f"--user-data-dir={Path(tmp) / 'profile'}",
            f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
        if not out.exists() or out.stat().st_size == 0:
            sys.exit(f"render_html_png: Chromium wrote no screenshot (exit {done.returncode})\n"
                     + done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="HTML report or report.json")
    parser.add_argument("out", type=Path, help="PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    parser.add_argument("--chromium", help="Chromium binary (default: found on PATH)")
    args = parser.parse_args()
    if not args.source.is_file():
        sys.exit(f"render_html_png: {args.source}: no such file")
    render(args.source, args.out, width=args.width, height=args.height,
           chromium=find_chromium(args.chromium))
    print(args.out)


if __name__ == "__main__":
    main()
