"""`make bench`: the course's speed figures, printed as a table and saved to .bench/bench.json.

A benchmark, not a test: it never fails on a time; it reports each figure against its target.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import torch

from helpers.attention import FusedMultiHeadAttention
from helpers.layouts import split, to_torch
from helpers.timing import interleaved_medians
from helpers.widgets import HeadsExplorer

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def slider_kernel(moves: int = 50) -> list[dict]:
    """Value change -> new picture and table ready, for HeadsExplorer. Each landing on h is timed;
    the slider alternates between h and a partner so every landing is a real redraw."""
    partner = {1: 2, 4: 8, 16: 8}
    rows = []
    for d_model in (64, 512):
        for h in (1, 4, 16):
            panel = HeadsExplorer(h=partner[h], d_model=d_model)
            times = []
            for _ in range(moves):
                panel.h_slider.value = partner[h]
                start = time.perf_counter()
                panel.h_slider.value = h
                times.append(time.perf_counter() - start)
                assert "✗" not in panel.message.value
            rows.append({
                "h": h, "d_model": d_model,
                "median_ms": 1e3 * statistics.median(times), "p95_ms": 1e3 * percentile(times, 0.95),
            })  # fmt: skip
    return rows


def slider_browser(moves: int = 20) -> dict:
    """Key press on the h slider -> new picture loaded in the page, in JupyterLab in Chromium,
    at h = 15-16 (d_model = 480, which both divide)."""
    from tests.browser.lab import chromium_page, jupyter_lab, open_and_run_all, panel

    with jupyter_lab() as (base, token), chromium_page() as page:
        open_and_run_all(page, base, token, "02_per_head_projections.ipynb")
        box = panel(page)
        box.scroll_into_view_if_needed()
        h_slider, d_model_slider = box.locator(".widget-slider").all()
        d_model_slider.locator(".noUi-handle").focus()
        for _ in range((480 - 64) // 8):
            page.keyboard.press("ArrowRight")
        h_slider.locator(".noUi-handle").focus()
        for _ in range(16 - 4):
            page.keyboard.press("ArrowRight")
        page.wait_for_function("() => document.body.innerText.includes('h = 16, d_model = 480')")
        box.locator("img").first.evaluate(
            """img => {
                window.__times = [];
                document.addEventListener('keydown', () => { window.__t0 = performance.now(); }, true);
                img.addEventListener('load', () => {
                    if (window.__t0) { window.__times.push(performance.now() - window.__t0); window.__t0 = null; }
                });
            }"""
        )  # fmt: skip
        h_slider.locator(".noUi-handle").focus()
        for i in range(moves):
            page.keyboard.press("ArrowLeft" if i % 2 == 0 else "ArrowRight")
            page.wait_for_function(f"() => window.__times.length >= {i + 1}", timeout=10_000)
        times = page.evaluate("() => window.__times")
    return {
        "moves": moves,
        "median_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
    }


def nbval_suite() -> dict:
    """Wall time of the whole strict nbval run, as `make test` does it."""
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "notebooks"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    return {"seconds": time.perf_counter() - start, "passed": run.returncode == 0}


def per_notebook() -> list[dict]:
    """Each notebook on a fresh kernel: run time (with kernel start) and the kernel's peak RSS."""
    import nbformat
    from nbclient import NotebookClient

    rows = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        probe = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        nb.cells.append(nbformat.v4.new_code_cell(probe))
        start = time.perf_counter()
        NotebookClient(
            nb, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
        seconds = time.perf_counter() - start
        peak_mb = int(nb.cells[-1].outputs[0]["text"]) / 1024
        rows.append({"notebook": path.name, "seconds": seconds, "peak_mb": peak_mb})
    return rows


@torch.no_grad()
def fused_vs_torch(repeats: int = 60) -> dict:
    """FusedMultiHeadAttention against nn.MultiheadAttention with the same weights, interleaved."""
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(512, 8, bias=True).eval()
    mha = to_torch(fused).eval()
    x = torch.randn(8, 128, 512)
    medians = interleaved_medians({
        "fused, no weights": lambda: fused(x, need_weights=False),
        "torch, no weights": lambda: mha(x, x, x, need_weights=False),
        "fused, h maps": lambda: fused(x),
        "torch, h maps": lambda: mha(x, x, x, need_weights=True, average_attn_weights=False),
    }, repeats=repeats)  # fmt: skip
    return {
        "ms": {k: 1e3 * v for k, v in medians.items()},
        "ratio_no_weights": medians["fused, no weights"] / medians["torch, no weights"],
        "ratio_with_maps": medians["fused, h maps"] / medians["torch, h maps"],
    }


@torch.no_grad()
def per_head_vs_fused(repeats: int = 20) -> list[dict]:
    """The per-head Python loop against the fused matrix, same weights, B=8, T=128, d_model=512."""
    x = torch.randn(8, 128, 512)
    rows = []
    for h in (1, 2, 4, 8, 16, 32, 64):
        torch.manual_seed(0)
        fused = FusedMultiHeadAttention(512, h).eval()
        per_head = split(fused).eval()
        m = interleaved_medians(
            {"loop": lambda p=per_head: p(x), "fused": lambda f=fused: f(x)}, repeats=repeats
        )
        rows.append({"h": h, "loop_ms": 1e3 * m["loop"], "fused_ms": 1e3 * m["fused"],
                     "ratio": m["loop"] / m["fused"]})  # fmt: skip
    return rows


def main() -> None:
    results = {"date": date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
               "torch": torch.__version__, "threads": torch.get_num_threads()}  # fmt: skip
    print(f"benchmark {results['date']} on {results['machine']}, torch {results['torch']}\n")

    results["slider_kernel"] = slider_kernel()
    print(
        "slider redraw, kernel side (HeadsExplorer, 50 moves): target at h=16, d_model=512: median <= 40 ms, p95 <= 80 ms"
    )
    for r in results["slider_kernel"]:
        print(
            f"  h={r['h']:>2} d_model={r['d_model']:>3}: median {r['median_ms']:6.1f} ms   p95 {r['p95_ms']:6.1f} ms"
        )

    if os.path.exists("/usr/bin/chromium"):
        results["slider_browser"] = b = slider_browser()
        print(
            f"\nslider end to end in Chromium (key press -> picture loaded, h 15<->16, 20 moves): "
            f"median {b['median_ms']:.0f} ms, p95 {b['p95_ms']:.0f} ms   target median <= 80 ms"
        )
    else:
        print("\nslider end to end: skipped, no /usr/bin/chromium (apt-get install -y chromium)")

    results["nbval_suite"] = s = nbval_suite()
    print(
        f"\nwhole notebook suite under pytest --nbval: {s['seconds']:.1f} s (passed: {s['passed']})   target <= 60 s"
    )
    results["notebooks"] = per_notebook()
    for r in results["notebooks"]:
        print(f"  {r['notebook']:<32} {r['seconds']:5.1f} s   kernel peak {r['peak_mb']:6.0f} MB")

    results["fused_vs_torch"] = f = fused_vs_torch()
    print(
        "\nFusedMultiHeadAttention vs nn.MultiheadAttention (B=8, T=128, d_model=512, h=8, forward, no grad):"
    )
    for name, ms in f["ms"].items():
        print(f"  {name:<20} {ms:6.2f} ms")
    print(
        f"  ratio without weights {f['ratio_no_weights']:.3f} (target <= 1.10); with the h maps {f['ratio_with_maps']:.3f}"
    )

    results["per_head_vs_fused"] = rows = per_head_vs_fused()
    print("\nper-head loop vs fused (same weights, with maps):")
    for r in rows:
        print(
            f"  h={r['h']:>2}: loop {r['loop_ms']:7.2f} ms   fused {r['fused_ms']:6.2f} ms   ratio {r['ratio']:5.2f}"
        )

    OUT.mkdir(exist_ok=True)
    (OUT / "bench.json").write_text(json.dumps(results, indent=2))
    print(f"\nsaved {OUT / 'bench.json'}")


if __name__ == "__main__":
    main()
