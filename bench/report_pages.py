"""HTML reports of bench workloads, opened in headless Chromium.

`python -m bench.report_pages [--out DIR]` writes the report of a real-model
train step (gpt2_train) and of a generated 10k-op module, opens each in
headless Chromium and prints how long it took to open (in-page time from the
start of navigation to the drawn page, and the browser run's wall time
including Chromium's own start). The tests use `open_headless` to check that
a report renders with no console messages; they never assert a time.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import jax

from bench.measure import _shardings, mesh_of
from bench.models import MODELS
from bench.scaling import chain_module
from bench.workloads import ALL
from meshjit import htmlreport
from meshjit.frontend.jit import jit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium() -> str | None:
    """The headless browser's path, or None (Debian: `apt install chromium`)."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class Opened:
    """What headless Chromium saw of a page."""

    status: str  # the page's own verdict: "ok", "error", or "" if it never finished
    render_ms: float  # the page's script, start to drawn
    ready_ms: float  # from the start of navigation to drawn
    wall_s: float  # the browser run, Chromium's start included
    console: list[str] = field(default_factory=list)  # every console message
    dom: str = ""


def open_headless(
    path: str, screenshot: str | None = None, timeout: float = 120.0
) -> Opened:
    """Opens `path` in headless Chromium; returns its DOM after the page's
    scripts ran and every console message (errors and uncaught exceptions
    included). Writes a screenshot of the page where asked."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("no chromium in PATH (apt install chromium)")
    url = "file://" + os.path.abspath(path)
    base = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ]
    with tempfile.TemporaryDirectory(prefix="meshjit-chromium-") as profile:
        start = time.perf_counter()
        run = subprocess.run(
            [*base, f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        wall = time.perf_counter() - start
        if screenshot:
            subprocess.run(
                [
                    *base,
                    f"--user-data-dir={profile}",
                    "--window-size=1400,1600",
                    f"--screenshot={os.path.abspath(screenshot)}",
                    url,
                ],
                capture_output=True,
                timeout=timeout,
                check=False,
            )
    dom = run.stdout

    def attr(name: str) -> str:
        m = re.search(rf'<html[^>]*\sdata-{name}="([^"]*)"', dom)
        return m.group(1) if m else ""

    console = [
        line.split("] ", 1)[-1]
        for line in run.stderr.splitlines()
        if ":CONSOLE" in line
    ]
    return Opened(
        attr("status"),
        float(attr("render-ms") or "nan"),
        float(attr("ready-ms") or "nan"),
        wall,
        console,
        dom,
    )


def workload_report(name: str, layout: int, path: str) -> tuple[str, Any]:
    """Compiles a bench workload with meshjit and writes its report (with
    the layout's analytic bound where the bench knows one); returns the
    page's path and the compiled function."""
    work = next(w for w in (*ALL, *MODELS) if w.name == name)
    lay = work.layouts[layout]
    mesh = mesh_of(lay.mesh)
    fn = jit(
        work.fn,
        in_shardings=_shardings(mesh, lay.in_specs),
        out_shardings=_shardings(mesh, lay.out_specs),
    )
    args = work.make_args()
    compiled = fn.lower(*args).compile()
    bound = lay.bound[1] if lay.bound is not None else None
    return compiled.report(path, bound_bytes=bound), compiled


def module_report(text: str, path: str, title: str) -> str:
    """The report of a module, as `meshjit-opt -p spmd-pipeline --report`."""
    return htmlreport.write_html(htmlreport.collect(text, "spmd-pipeline", title), path)


def lines(out_dir: str) -> list[str]:
    """Bench lines: each page's size and opening time."""
    if chromium() is None:
        return ["- skipped: no chromium in PATH (apt install chromium)"]
    pages: list[tuple[str, str]] = []
    gpt, _ = workload_report("gpt2_train", 0, os.path.join(out_dir, "gpt2_train.html"))
    pages.append(("gpt2_train (dp2_tp4), a real-model train step", gpt))
    layers = 2000  # 5 ops each: 10k ops
    chain = module_report(
        chain_module(layers, (("x", 2), ("y", 4)), 64),
        os.path.join(out_dir, "chain_10k.html"),
        "chain of 10k ops",
    )
    pages.append((f"generated module, {layers * 5} ops", chain))
    out = []
    for what, page in pages:
        opened = [open_headless(page) for _ in range(3)]
        best = min(opened, key=lambda o: o.ready_ms)
        status = ", ".join(sorted({o.status or "unfinished" for o in opened}))
        out.append(
            f"- {what}: {os.path.getsize(page) / 1e6:.1f} MB page, opens in "
            f"{best.ready_ms / 1e3:.2f} s (navigation start to drawn, best of 3; "
            f"headless Chromium run {best.wall_s:.2f} s with its own start), "
            f"status {status}, {max(len(o.console) for o in opened)} console messages"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report_pages")
    parser.add_argument("--out", default=None, help="folder for the pages")
    args = parser.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="meshjit-reports-")
    os.makedirs(out, exist_ok=True)
    print(f"pages in {out} ({len(jax.devices())} devices)")
    print("\n".join(lines(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
