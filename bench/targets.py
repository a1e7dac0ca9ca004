"""Issue 15's table as bench/bench.py measured it: each target, the figure of this run, met or missed.

The issue is done when every row is met in one full run; printing them together from the run's own
results (rather than reading them off the lines above) keeps the verdict and the figures the same.
A row whose measurement did not run (a ``--*-only`` mode) is left out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

Row = tuple[str, str, str]  # target, measured, verdict


def _rows() -> list[tuple[str, str, Callable[[dict[str, Any]], tuple[str, bool]]]]:
    """(target, the result it needs, figure and verdict from the results)."""
    def creates(r: dict[str, Any]) -> tuple[str, bool]:
        c = r["create"]
        return (f"{c['gateway_creates_per_s']:.0f} / {c['etcd_puts_per_s']:.0f} = {c['ratio']:.2f}",
                c["ratio"] >= 0.30)

    def create_cpu(r: dict[str, Any]) -> tuple[str, bool]:
        cpu = {k: v for k, v in r["create"]["cpu_us"].items() if k != "etcd"}
        total = sum(cpu.values())
        return (f"{total:.0f} us (gateway {cpu.get('aggregator', 0):.0f} + core-api {cpu.get('core-api', 0):.0f};"
                f" etcd {r['create']['cpu_us'].get('etcd', 0):.0f})", total <= 350)

    def get_p50(r: dict[str, Any]) -> tuple[str, bool]:
        g = r["get"]
        return (f"{g['gateway']['p50_ms']:.1f} / {g['direct']['p50_ms']:.1f} ms = {g['p50_ratio']:.2f}x",
                g["p50_ratio"] <= 1.30)

    def get_cpu(r: dict[str, Any]) -> tuple[str, bool]:
        cpu = r["get"]["cpu_us"]
        ratio = cpu.get("aggregator", 0) / max(cpu.get("core-api", 1), 1)
        return (f"{cpu.get('aggregator', 0):.0f} / {cpu.get('core-api', 0):.0f} us = {ratio:.2f}", ratio <= 0.4)

    def watch_p99(r: dict[str, Any]) -> tuple[str, bool]:
        w = r["watch"]
        return (f"{w['p99_ms']:.1f} ms ({w['watchers']} watchers, median of {w['events']} events; worst"
                f" {w['worst_p99_ms']:.1f})", w["p99_ms"] <= 50)

    def watch_cpu(r: dict[str, Any]) -> tuple[str, bool]:
        c = r["watch"]["cpu_us_per_delivery"]
        return (f"{c['chain']:.1f} us (gateway {c.get('aggregator', 0):.1f}, core-api {c.get('core-api', 0):.1f})",
                c["chain"] <= 20)

    def watch_mem(r: dict[str, Any]) -> tuple[str, bool]:
        m = r["watch"]["kib_per_watcher"]
        return (f"{m['chain']:.1f} KiB (gateway {m.get('aggregator', 0):.1f}, core-api {m.get('core-api', 0):.1f})",
                m["chain"] <= 30)

    def list_time(r: dict[str, Any]) -> tuple[str, bool]:
        li = r["list"]
        return f"{li['seconds']:.3f} s ({li['items']} items)", li["seconds"] <= 0.5

    def list_rss(r: dict[str, Any]) -> tuple[str, bool]:
        ratios = r["list"]["extra_rss_ratio"]
        worst = max(ratios.values())
        shown = ", ".join(f"{k} {v:.2f}x" for k, v in sorted(ratios.items()))
        return shown, worst <= 1.5

    def object_rss(r: dict[str, Any]) -> tuple[str, bool]:
        li = r["list"]
        per = li["core_rss_per_object_bytes"]
        return f"{per / 1000:.2f} KB ({li['object_bytes']['stored']}-byte objects, {li['added']} added)", per <= 3000

    def cold(r: dict[str, Any]) -> tuple[str, bool]:
        runs = r["cold_start"]
        median = statistics.median(runs)
        return f"{median:.2f} s (of {' '.join(f'{t:.2f}' for t in runs)})", median < 1.5

    return [
        ("creates/s via gateway / raw etcd puts/s, c=64 >= 0.30", "create", creates),
        ("CPU per create, all services <= 350 us", "create", create_cpu),
        ("GET via gateway / direct, p50 <= 1.30x", "get", get_p50),
        ("gateway CPU / core-api CPU per GET <= 0.4", "get", get_cpu),
        ("one event to 1,000 watchers, p99 <= 50 ms", "watch", watch_p99),
        ("fan-out CPU per delivery, chain <= 20 us", "watch", watch_cpu),
        ("memory per watcher, chain <= 30 KiB", "watch", watch_mem),
        ("LIST of 50,000 ConfigMaps via gateway <= 0.5 s", "list", list_time),
        ("extra RSS during a LIST / response bytes <= 1.5x", "list", list_rss),
        ("core-api RSS per stored ConfigMap <= 3 KB", "list", object_rss),
        ("cold start to /readyz, median < 1.5 s", "cold_start", cold),
    ]


def rows(r: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    for target, needed, measure in _rows():
        if needed not in r:
            continue
        figure, met = measure(r)
        out.append((target, figure, "met" if met else "MISSED"))
    return out


def table(r: dict[str, Any]) -> str:
    found = rows(r)
    if not found:
        return ""
    width = max(len(t) for t, _, _ in found)
    figure_width = max(len(f) for _, f, _ in found)
    lines = ["issue 15 targets, this run:"]
    lines += [f"  {t:<{width}}  {f:<{figure_width}}  {v}" for t, f, v in found]
    met = sum(v == "met" for _, _, v in found)
    lines.append(f"  {met} of {len(found)} met")
    return "\n".join(lines)
