#!/usr/bin/env python3
"""Render a decflow HTML report (or a report.json, or a web page) to a PNG with headless
Chromium.

    python scripts/render_html_png.py REPORT.html|report.json|URL OUT.png [--width 1280]
        [--height PIXELS] [--chromium PATH]
    python scripts/render_html_png.py REPORT.html|report.json --measure [--width 1440]

A `.json` input is rendered to HTML first with `decflow.views.html.render_html`. The PNG
shows the whole page: its size is measured first (a copy of the page that writes its
scroll width and height into its title, read back with `--dump-dom`), unless `--height` is
given. `--measure` prints that size (`WIDTHxHEIGHT`; a width above `--width` means the
page scrolls sideways) instead of writing a PNG. An `http(s)://` URL (a Prefect UI page)
is shot as it is after `--wait` seconds of the page's own time, `--height` pixels tall.
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
URL_HEIGHT = 1000  # a web page's shot, unless --height says otherwise


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


def page_size(page: Path, workdir: Path, width: int, chromium: str) -> tuple[int, int]:
    """The rendered page's full width and height in a window `width` wide (the report
    itself carries no script: a measuring copy does)."""
    probe = workdir / "measure.html"
    script = ("<script>window.addEventListener('load', () => { const d = "
              "document.documentElement; document.title = 'size=' + d.scrollWidth + 'x' + "
              "d.scrollHeight; });</script>")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"),
                     encoding="utf-8")
    done = subprocess.run(
        [*chromium_command(chromium, workdir, width, MEASURE_HEIGHT), "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    found = re.search(r"<title>size=(\d+)x(\d+)</title>", done.stdout)
    if found is None:
        sys.exit("render_html_png: could not measure the page; pass --height\n"
                 + done.stderr[-2000:])
    return int(found.group(1)), int(found.group(2))


def measure(source: Path, *, width: int, chromium: str) -> tuple[int, int]:
    with tempfile.TemporaryDirectory(prefix="decflow-png-") as tmp:
        workdir = Path(tmp)
        return page_size(html_file(source, workdir), workdir, width, chromium)


def render(source: Path | str, out: Path, *, width: int, height: int | None, chromium: str,
           wait_s: float = 10.0) -> None:
    with tempfile.TemporaryDirectory(prefix="decflow-png-") as tmp:
        workdir = Path(tmp)
        extra: list[str] = []
        if isinstance(source, str):  # a web page: its scripts render it
            uri = source
            extra = [f"--virtual-time-budget={int(wait_s * 1000)}"]
            height = height or URL_HEIGHT
        else:
            page = html_file(source, workdir)
            uri = page.as_uri()
            if height is None:
                height = page_size(page, workdir, width, chromium)[1]
        out = out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        command = [*chromium_command(chromium, workdir, width, height), *extra,
                   f"--screenshot={out}", uri]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
        if not out.exists() or out.stat().st_size == 0:
            sys.exit(f"render_html_png: Chromium wrote no screenshot (exit {done.returncode})\n"
                     + done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="HTML report, report.json or an http(s) URL")
    parser.add_argument("out", type=Path, nargs="?", help="PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=None,
                        help="PNG height in pixels (default: the whole page)")
    parser.add_argument("--measure", action="store_true",
                        help="print the page's WIDTHxHEIGHT instead of writing a PNG")
    parser.add_argument("--wait", type=float, default=10.0,
                        help="seconds a URL's page gets to render itself")
    parser.add_argument("--chromium", help="Chromium binary (default: found on PATH)")
    args = parser.parse_args()
    chromium = find_chromium(args.chromium)
    web = args.source.startswith(("http://", "https://"))
    source: Path | str = args.source if web else Path(args.source)
    if isinstance(source, Path) and not source.is_file():
        sys.exit(f"render_html_png: {source}: no such file")
    if args.measure:
        if not isinstance(source, Path):
            sys.exit("render_html_png: --measure takes a report, not a URL")
        width, height = measure(source, width=args.width, chromium=chromium)
        print(f"{width}x{height}")
        return
    if args.out is None:
        sys.exit("render_html_png: OUT.png is needed (or --measure)")
    render(source, args.out, width=args.width, height=args.height, chromium=chromium,
           wait_s=args.wait)
    print(args.out)


if __name__ == "__main__":
    main()
