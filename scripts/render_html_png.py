#!/usr/bin/env python3
"""Render a decflow HTML report (or a report.json) to a PNG with headless Chromium.

    python scripts/render_html_png.py REPORT.html|report.json OUT.png [--width 1280]
        [--height PIXELS] [--chromium PATH]

A `.json` input is rendered to HTML first with `decflow.views.html.render_html`. The PNG
shows the whole page: its height is measured first (a copy of the page that writes its
scroll height into its title, read back with `--dump-dom`), unless `--height` is given.
Chromium runs with networking-related background services off and a throwaway profile, so
the screenshot shows exactly what the self-contained file shows offline. Needs Debian's
`chromium` (`apt-get install -y chromium`) or `--chromium PATH` / `$DECFLOW_CHROMIUM`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120
MEASURE_HEIGHT = 800  # the viewport while measuring; the page's own height is read back


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


def chromium_command(chromium: str, workdir: Path, width: int, height: int) -> list[str]:
    return [
        chromium, "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--hide-scrollbars", f"--user-data-dir={workdir / 'profile'}",
        f"--window-size={width},{height}",
    ]


def page_height(page: Path, workdir: Path, width: int, chromium: str) -> int:
    """The rendered page's full height at `width` (the report itself carries no script:
    a measuring copy does)."""
    probe = workdir / "measure.html"
    script = ("<script>window.addEventListener('load', () => { document.title = "
              "'height=' + document.documentElement.scrollHeight; });</script>")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"),
                     encoding="utf-8")
    done = subprocess.run(
        [*chromium_command(chromium, workdir, width, MEASURE_HEIGHT), "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    found = re.search(r"<title>height=(\d+)</title>", done.stdout)
    if found is None:
        sys.exit("render_html_png: could not measure the page height; pass --height\n"
                 + done.stderr[-2000:])
    return int(found.group(1))


def render(source: Path, out: Path, *, width: int, height: int | None, chromium: str) -> None:
    with tempfile.TemporaryDirectory(prefix="decflow-png-") as tmp:
        workdir = Path(tmp)
        page = html_file(source, workdir)
        if height is None:
            height = page_height(page, workdir, width, chromium)
        out = out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        command = [*chromium_command(chromium, workdir, width, height),
                   f"--screenshot={out}", page.as_uri()]
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
    parser.add_argument("--height", type=int, default=None,
                        help="PNG height in pixels (default: the whole page)")
    parser.add_argument("--chromium", help="Chromium binary (default: found on PATH)")
    args = parser.parse_args()
    if not args.source.is_file():
        sys.exit(f"render_html_png: {args.source}: no such file")
    render(args.source, args.out, width=args.width, height=args.height,
           chromium=find_chromium(args.chromium))
    print(args.out)


if __name__ == "__main__":
    main()
