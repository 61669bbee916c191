"""The performance grid of one H200 run: one object per (model, batch, context) cell, the agentic replay and
startup times, as the committed `integration/results/h200/summary.json`, and the README tables built from it.

  python -m vosti_plugin.integration.bench.grid --throughput RUN/tp_*.json --agentic RUN/ag_*.json \\
      [--startup RUN/startup/tp_*.json] [--vosti-mode vosti] --out integration/results/h200
  python -m vosti_plugin.integration.bench.grid --summary integration/results/h200/summary.json --out DIR  # tables again
  python -m vosti_plugin.integration.bench.grid --summary integration/results/h200/summary.json --readme  # README's

Inputs are the per-mode JSONs of `throughput` and `agentic` (or the bench summary.json files made from them).
Startup is every throughput result's `startup_s`, cold when the run began with empty Triton and vLLM compile
caches (`compile_caches_at_start`, recorded by `throughput`), warm otherwise. The vosti mode named by
--vosti-mode is reported as "vosti".
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from vosti_plugin.integration.bench.report import TARGETS, _label, load
from vosti_plugin.integration.summary_json import dumps

MODES = ("vosti", "default", "bi")


def _mode(result: dict, vosti_mode: str) -> str | None:
    name = _label(result)
    if name == vosti_mode:
        return "vosti"
    return name if name in ("default", "bi") else None


def _startup_kind(result: dict) -> str:
    caches = result.get("compile_caches_at_start")
    if caches is None:
        return "unknown"
    return "cold" if not any(caches.values()) else "warm"


def build(throughput: list[dict], agentic: list[dict], startup: list[dict], vosti_mode: str = "vosti") -> dict:
    """The grid summary from per-mode results (results of modes other than vosti_mode, default and bi are
    left out)."""
    cells: dict[tuple, dict] = {}
    for res in throughput:
        mode = _mode(res, vosti_mode)
        if mode is None:
            continue
        for row in res["rows"]:
            key = (res["model"], row["batch"], row["context"])
            cell = cells.setdefault(key, {"model": key[0], "batch": key[1], "context": key[2],
                                          "decode_tok_s": dict.fromkeys(MODES), "prefill_tok_s": dict.fromkeys(MODES)})
            if cell["decode_tok_s"][mode] is not None:
                raise ValueError(f"two {mode} results for {key}: pass one run per mode and model")
            cell["decode_tok_s"][mode] = round(row["decode_tok_s"], 1)
            cell["prefill_tok_s"][mode] = round(row["prefill_tok_s"], 1)
    sessions: dict[str, dict] = {}
    for res in agentic:
        mode = _mode(res, vosti_mode)
        if mode is None:
            continue
        entry = sessions.setdefault(res["model"], {"model": res["model"], "params": res.get("params"),
                                                   "mean_session_s": dict.fromkeys(MODES),
                                                   "total_s": dict.fromkeys(MODES)})
        entry["mean_session_s"][mode] = round(res["mean_session_s"], 2)
        entry["total_s"][mode] = round(res["total_s"], 2)
    starts: dict[tuple, list[float]] = {}
    for res in [*throughput, *startup]:
        mode = _mode(res, vosti_mode)
        if mode is not None:
            starts.setdefault((res["model"], mode, _startup_kind(res)), []).append(res["startup_s"])
    return {"kind": "grid", "targets": TARGETS,
            "cells": [cells[k] for k in sorted(cells)],
            "agentic": [sessions[m] for m in sorted(sessions)],
            "startup_s": [{"model": m, "mode": mode, "caches": kind, "startup_s": round(statistics.median(v), 1),
                           "runs": len(v)} for (m, mode, kind), v in sorted(starts.items())]}


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _check(value: float | None, target: float) -> str:
    return "-" if value is None else f"{value:.2f}x" + ("" if value >= target else " ✗")


def markdown(summary: dict) -> str:
    t = summary["targets"]
    parts = [f"Targets: decode >= {t['decode_vs_default']}x default and >= {t['decode_vs_bi']}x BI in every cell; "
             f"prefill >= {t['prefill_vs_default']}x default and >= {t['prefill_vs_bi']}x BI (context > 0); agentic "
             f">= {t['agentic_vs_bi']}x BI; startup <= {t['startup_vs_default']}x default. ✗ marks a miss."]
    met: dict[str, list[bool]] = {}
    for model in sorted({c["model"] for c in summary["cells"]}):
        lines = [f"### {model} (tok/s)", "",
                 "| batch | context | decode vosti | default | BI | vs default | vs BI "
                 "| prefill vosti | default | BI | vs default | vs BI |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in (c for c in summary["cells"] if c["model"] == model):
            d, p = c["decode_tok_s"], c["prefill_tok_s"]
            ratios = {"decode vs default": (_ratio(d["vosti"], d["default"]), t["decode_vs_default"]),
                      "decode vs BI": (_ratio(d["vosti"], d["bi"]), t["decode_vs_bi"])}
            if c["context"] > 0:
                ratios["prefill vs default"] = (_ratio(p["vosti"], p["default"]), t["prefill_vs_default"])
                ratios["prefill vs BI"] = (_ratio(p["vosti"], p["bi"]), t["prefill_vs_bi"])
            for name, (r, target) in ratios.items():
                if r is not None:
                    met.setdefault(name, []).append(r >= target)
            pre = [ratios.get("prefill vs default", (None,))[0], ratios.get("prefill vs BI", (None,))[0]]
            lines.append(
                f"| {c['batch']} | {c['context']} | {_fmt(d['vosti'], '.0f')} | {_fmt(d['default'], '.0f')} | "
                f"{_fmt(d['bi'], '.0f')} | {_check(ratios['decode vs default'][0], t['decode_vs_default'])} | "
                f"{_check(ratios['decode vs BI'][0], t['decode_vs_bi'])} | {_fmt(p['vosti'], '.0f')} | "
                f"{_fmt(p['default'], '.0f')} | {_fmt(p['bi'], '.0f')} | "
                f"{_check(pre[0], t['prefill_vs_default']) if c['context'] else '-'} | "
                f"{_check(pre[1], t['prefill_vs_bi']) if c['context'] else '-'} |")
        parts.append("\n".join(lines))
    if met:
        parts.append("Cells meeting each target: " + "; ".join(f"{k} {sum(v)}/{len(v)}" for k, v in met.items()) + ".")
    if summary["agentic"]:
        lines = ["### Agentic replay (mean seconds per session)", "",
                 "| model | sessions x turns | vosti | default | BI | vosti vs BI |", "|---|---|---|---|---|---|"]
        for a in summary["agentic"]:
            s, prm = a["mean_session_s"], a.get("params") or {}
            lines.append(f"| {a['model']} | {prm.get('sessions', '?')} x {prm.get('turns', '?')} | "
                         f"{_fmt(s['vosti'], '.1f')} | {_fmt(s['default'], '.1f')} | {_fmt(s['bi'], '.1f')} | "
                         f"{_check(_ratio(s['bi'], s['vosti']), t['agentic_vs_bi'])} |")
        parts.append("\n".join(lines))
    if summary["startup_s"]:
        by = {(s["model"], s["mode"], s["caches"]): s["startup_s"] for s in summary["startup_s"]}
        lines = ["### Startup (s; cold: empty Triton and vLLM compile caches)", "",
                 "| model | caches | vosti | default | BI | vosti / default |", "|---|---|---|---|---|---|"]
        for model, kind in sorted({(s["model"], s["caches"]) for s in summary["startup_s"]}):
            v, d, b = (by.get((model, m, kind)) for m in MODES)
            r = _ratio(v, d)
            lines.append(f"| {model} | {kind} | {_fmt(v, '.0f')} | {_fmt(d, '.0f')} | {_fmt(b, '.0f')} | "
                         + ("-" if r is None else f"{r:.2f}x" + ("" if r <= t["startup_vs_default"] else " ✗")) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def _ratios(cells: list[dict], phase: str, other: str) -> list[float]:
    return [r for c in cells if (r := _ratio(c[phase]["vosti"], c[phase][other])) is not None]


def readme_table(summary: dict) -> str:
    """The README's compact table: per model and batch, each ratio's range over the contexts, then agentic and
    startup (the block between the grid markers in README.md)."""
    lines = ["| model | batch | decode vs default | decode vs BI | prefill vs default | prefill vs BI |",
             "|---|---|---|---|---|---|"]
    for model, batch in sorted({(c["model"], c["batch"]) for c in summary["cells"]}):
        cells = [c for c in summary["cells"] if c["model"] == model and c["batch"] == batch]
        prefill = [c for c in cells if c["context"] > 0]
        lines.append(f"| {model} | {batch} | {_span(_ratios(cells, 'decode_tok_s', 'default'))} | "
                     f"{_span(_ratios(cells, 'decode_tok_s', 'bi'))} | "
                     f"{_span(_ratios(prefill, 'prefill_tok_s', 'default'))} | "
                     f"{_span(_ratios(prefill, 'prefill_tok_s', 'bi'))} |")
    notes = []
    for a in summary["agentic"]:
        s = a["mean_session_s"]
        if s["vosti"] and s["bi"]:
            notes.append(f"- Agentic replay, {a['model']}: {s['vosti']:.1f} s per session against BI's {s['bi']:.1f} s "
                         f"({s['bi'] / s['vosti']:.2f}x BI)" + (f", default {s['default']:.1f} s." if s["default"] else "."))
    by = {(s["model"], s["mode"], s["caches"]): s["startup_s"] for s in summary["startup_s"]}
    for model, kind in sorted({(s["model"], s["caches"]) for s in summary["startup_s"]}):
        v, d = by.get((model, "vosti", kind)), by.get((model, "default", kind))
        if v and d:
            notes.append(f"- Startup, {model} ({kind} caches): vosti {v:.0f} s, default {d:.0f} s ({v / d:.2f}x).")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--throughput", nargs="*", default=[])
    ap.add_argument("--agentic", nargs="*", default=[])
    ap.add_argument("--startup", nargs="*", default=[], help="extra throughput results run only for startup times")
    ap.add_argument("--summary", type=Path, help="re-render the tables of a grid summary.json")
    ap.add_argument("--vosti-mode", default="vosti", help="the bench mode reported as vosti (e.g. vosti-tma)")
    ap.add_argument("--out", type=Path, help="where summary.json and grid.md go (required unless --readme)")
    ap.add_argument("--readme", action="store_true", help="print only the README's compact table of --summary")
    a = ap.parse_args(argv)
    if a.readme:
        if not a.summary:
            ap.error("--readme needs --summary")
        import json

        print(readme_table(json.loads(a.summary.read_text())), end="")
        return 0
    if a.out is None:
        ap.error("--out is required")
    if a.summary:
        import json

        summary = json.loads(a.summary.read_text())
    else:
        summary = build(load(a.throughput, "throughput"), load(a.agentic, "agentic"), load(a.startup, "throughput"),
                        a.vosti_mode)
        if not summary["cells"] and not summary["agentic"]:
            ap.error(f"no {a.vosti_mode}, default or bi results in the inputs")
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.summary:
        (a.out / "summary.json").write_text(dumps(summary) + "\n")
    text = markdown(summary)
    (a.out / "grid.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
