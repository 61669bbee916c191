"""Side-by-side tables and a plot from the per-mode benchmark JSONs, and their compact summary.json.

  python -m vosti_plugin.integration.bench.report --throughput vosti.json default.json bi.json [--agentic ...] --out DIR

An input may also be a summary.json written here (the form kept in git under integration/results), so the
tables of a published run can be rebuilt from the tracked file alone.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from vosti_plugin.integration.summary_json import dumps

# the performance issue's targets (H200, vLLM 0.26.0): every cell, both models
TARGETS = {"decode_vs_bi": 3.2, "decode_vs_default": 0.95, "prefill_vs_default": 0.80, "prefill_vs_bi": 1.3,
           "agentic_vs_bi": 2.5, "startup_vs_default": 1.3}


SIGNIFICANT = 7
THROUGHPUT_FIELDS = ("mode", "backend", "model", "startup_s", "compile_caches_at_start", "eager", "attention_impls",
                     "compiled_while_serving", "rows")
# vLLM's JIT monitor (vllm/utils/jit_monitor.py) warns once per kernel compiled after the engine's warm-up
_JIT_WARNING = re.compile(r"\[jit_monitor\.py:\d+\] .*? during inference: (\w+(?:\.\w+)*)")
AGENTIC_FIELDS = ("mode", "backend", "model", "startup_s", "total_s", "mean_session_s", "params")


def _round(value, digits: int = SIGNIFICANT):
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: _round(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    return value


def compact(throughput: list[dict], agentic: list[dict]) -> dict:
    """summary.json of one bench run: every mode's rows (throughput) and session means (agentic), rounded;
    per-turn agentic detail is left out."""
    data = {"kind": "bench"}
    for kind, results, fields in (("throughput", throughput, THROUGHPUT_FIELDS), ("agentic", agentic, AGENTIC_FIELDS)):
        if results:
            data[kind] = [_round({k: r[k] for k in fields if k in r}) for r in results]
    return data


def compiled_while_serving(log: Path) -> list[str] | None:
    """The kernels vLLM's JIT monitor says were compiled after the engine's warm-up, from a mode's log (None: no log)."""
    if not log.is_file():
        return None
    return sorted({m.group(1) for m in _JIT_WARNING.finditer(log.read_text(errors="replace"))})


def load(paths, kind: str) -> list[dict]:
    """Per-mode result dicts of `kind` (throughput or agentic) from per-mode JSONs and/or summary.json files; a
    throughput JSON's log beside it (same name, .log) adds the kernels compiled while serving."""
    out = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        if data.get("kind") == "bench":
            out.extend(data.get(kind, []))
            continue
        compiled = compiled_while_serving(Path(p).with_suffix(".log")) if kind == "throughput" else None
        out.append(data if compiled is None else {**data, "compiled_while_serving": compiled})
    return out


def compiled_markdown(results: list[dict]) -> str:
    """A mode a line: the kernels compiled after the engine's warm-up, where its log was read."""
    known = [r for r in results if "compiled_while_serving" in r]
    if not known:
        return ""
    lines = ["| mode | kernels compiled while serving |", "|---|---|"]
    lines += [f"| {_label(r)} | {', '.join(r['compiled_while_serving']) or 'none'} |" for r in known]
    return "\n".join(lines)


def _label(res: dict) -> str:
    return res["mode"] + (f"/{res['backend']}" if res.get("backend") else "")


def _rows_by_key(res: dict) -> dict:
    return {(r["batch"], r["context"]): r for r in res["rows"]}


def throughput_markdown(results: list[dict]) -> str:
    by_mode = {_label(r): _rows_by_key(r) for r in results}
    default = by_mode.get("default", {})
    bi = next((v for k, v in by_mode.items() if k.startswith("bi")), {})
    keys = sorted({k for rows in by_mode.values() for k in rows})
    modes = list(by_mode)
    vosti_modes = [m for m in modes if m.startswith("vosti")]
    head = ["batch", "context"] + [f"decode {m}" for m in modes] + ["HBM floor"] \
        + [f"{v}/{b}" for v in vosti_modes for b in ("default", "BI")] \
        + [f"prefill {m}" for m in modes] + [f"prefill {v}/default" for v in vosti_modes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ratio(rows: dict, base: dict, key, field: str) -> str:
        ok = key in rows and key in base
        return f"{rows[key][field] / base[key][field]:.2f}x" if ok else "-"

    for key in keys:
        cells = [str(key[0]), str(key[1])]
        cells += [f"{by_mode[m][key]['decode_tok_s']:.0f}" if key in by_mode[m] else "-" for m in modes]
        any_row = next(by_mode[m][key] for m in modes if key in by_mode[m])
        cells.append(f"{any_row['decode_floor_tok_s']:.0f}")
        cells += [ratio(by_mode[v], base, key, "decode_tok_s") for v in vosti_modes for base in (default, bi)]
        cells += [f"{by_mode[m][key]['prefill_tok_s']:.0f}" if key in by_mode[m] else "-" for m in modes]
        cells += [ratio(by_mode[v], default, key, "prefill_tok_s") for v in vosti_modes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def step_ms(row: dict) -> float:
    """Milliseconds per decode step: the cached-context run also spends one step on the uncached tail."""
    tokens = round(row["decode_tok_s"] * row["decode_s"] / row["batch"])
    return 1e3 * row["decode_s"] / (tokens + (row.get("decode_method") == "cached"))


def step_gap_markdown(results: list[dict]) -> str:
    """vosti's decode step against default's, split into the gap at context 0 (dense ops, launches, host)
    and the part that grows with context (attention): gap(ctx) = gap(0) + [attention(ctx) difference]."""
    by_mode = {_label(r): _rows_by_key(r) for r in results}
    default = by_mode.get("default")
    vosti_modes = [m for m in by_mode if m.startswith("vosti")]
    if not default or not vosti_modes:
        return ""
    lines = ["| mode | batch | context | vosti ms/step | default ms/step | gap ms | gap at context 0 | "
             "gap growing with context |", "|---|---|---|---|---|---|---|---|"]
    for v in vosti_modes:
        for key in sorted(set(by_mode[v]) & set(default)):
            if "decode_s" not in by_mode[v][key] or "decode_s" not in default[key]:
                continue
            ours, theirs = step_ms(by_mode[v][key]), step_ms(default[key])
            zero = (key[0], 0)
            cells = [v, str(key[0]), str(key[1]), f"{ours:.2f}", f"{theirs:.2f}", f"{ours - theirs:.2f}"]
            if zero in by_mode[v] and zero in default and "decode_s" in by_mode[v][zero] and "decode_s" in default[zero]:
                gap0 = step_ms(by_mode[v][zero]) - step_ms(default[zero])
                cells += [f"{gap0:.2f}", f"{ours - theirs - gap0:.2f}"]
            else:
                cells += ["-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets_markdown(results: list[dict]) -> str:
    """Each vosti mode's ratio range against the targets, and in how many cells it meets them.
    Prefill at context 0 (one token per request) is left out."""
    by_mode = {_label(r): _rows_by_key(r) for r in results}
    default = by_mode.get("default", {})
    bi = next((v for k, v in by_mode.items() if k.startswith("bi")), {})
    checks = (("decode vs BI", bi, "decode_tok_s", TARGETS["decode_vs_bi"], 0),
              ("decode vs default", default, "decode_tok_s", TARGETS["decode_vs_default"], 0),
              ("prefill vs default", default, "prefill_tok_s", TARGETS["prefill_vs_default"], 1),
              ("prefill vs BI", bi, "prefill_tok_s", TARGETS["prefill_vs_bi"], 1))
    lines = ["| mode | ratio | target | range | cells meeting it |", "|---|---|---|---|---|"]
    for v in (m for m in by_mode if m.startswith("vosti")):
        for name, base, field, target, min_context in checks:
            ratios = [by_mode[v][k][field] / base[k][field] for k in sorted(set(by_mode[v]) & set(base))
                      if k[1] >= min_context]
            if ratios:
                met = sum(r >= target for r in ratios)
                lines.append(f"| {v} | {name} | {target:.2f}x | {min(ratios):.2f}-{max(ratios):.2f}x | "
                             f"{met}/{len(ratios)} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def agentic_markdown(results: list[dict]) -> str:
    lines = ["| mode | total s | mean session s | startup s |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {_label(r)} | {r['total_s']:.1f} | {r['mean_session_s']:.1f} | {r['startup_s']:.0f} |")
    bi = next((r for r in results if r["mode"] == "bi"), None)
    for vosti in (r for r in results if r["mode"].startswith("vosti")):
        if bi:
            lines.append(f"\n{vosti['mode']} is {bi['mean_session_s'] / vosti['mean_session_s']:.2f}x faster than BI "
                         f"per session (target {TARGETS['agentic_vs_bi']}x)")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({r["batch"] for res in results for r in res["rows"]})
    fig, axes = plt.subplots(1, len(batches), figsize=(5 * len(batches), 4), squeeze=False)
    for ax, b in zip(axes[0], batches):
        for res in results:
            rows = sorted((r for r in res["rows"] if r["batch"] == b), key=lambda r: r["context"])
            ax.plot([r["context"] for r in rows], [r["decode_tok_s"] for r in rows], marker="o", label=_label(res))
        floor = sorted((r for r in results[0]["rows"] if r["batch"] == b), key=lambda r: r["context"])
        ax.plot([r["context"] for r in floor], [r["decode_floor_tok_s"] for r in floor], "k--", label="HBM floor")
        ax.set_title(f"decode, batch {b}")
        ax.set_xlabel("cached context (tokens)")
        ax.set_ylabel("tok/s")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--throughput", nargs="*", default=[])
    ap.add_argument("--agentic", nargs="*", default=[])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--no-plot", action="store_true", help="skip decode_vs_context.png")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    parts = []
    throughput, agentic = load(a.throughput, "throughput"), load(a.agentic, "agentic")
    (a.out / "summary.json").write_text(dumps(compact(throughput, agentic)) + "\n")
    if throughput:
        results = throughput
        parts.append("## Throughput (tok/s)\n\n" + throughput_markdown(results))
        targets = targets_markdown(results)
        if targets:
            parts.append("## Against the targets\n\n" + targets)
        gaps = step_gap_markdown(results)
        if gaps:
            parts.append("## Decode step vs vLLM default (ms)\n\n" + gaps)
        compiled = compiled_markdown(results)
        if compiled:
            parts.append("## Kernels compiled while serving (vLLM's JIT monitor)\n\n" + compiled)
        if not a.no_plot:
            plot(results, a.out / "decode_vs_context.png")
    if agentic:
        parts.append("## Agentic sessions\n\n" + agentic_markdown(agentic))
    text = "\n\n".join(parts) + "\n"
    (a.out / "bench.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
