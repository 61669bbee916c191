"""Write the results: Markdown (Table-1 style: matches / comparisons per class per mode), JSON with
every comparison, and a PNG of the match rate per class per mode."""
from __future__ import annotations

import json
from pathlib import Path

from vosti_plugin.integration.harness.compare import CLASS_ORDER, CLASS_TITLES
from vosti_plugin.integration.summary_json import dumps

MODE_COLORS = {"vosti": "#2a9d3f", "default": "#7f7f7f", "bi-flash": "#e07b1a", "bi-triton": "#7b4fb0"}


def _cell(t) -> str:
    if t is None:
        return "—"
    text = f"{t.matches}/{t.compared}"
    if t.not_run:
        text += f" ({t.not_run} not run)"
    return text


def markdown(summary, command: str) -> str:
    lines = [f"# Determinism harness: {summary.scale} scale", "",
             f"Command: `{command}`", "",
             f"vLLM {summary.vllm_version or '?'} on {summary.device}; raw logits (top-{summary.top_k}) compared "
             "bit for bit; cells are bitwise matches / comparisons that ran (cases without a confirmed "
             "variation, e.g. no prefix-cache hit, are counted as not run).", ""]
    for model in summary.models:
        rows = [r for r in summary.rows if r.model == model]
        lines += [f"## {model}", "", "| mode | " + " | ".join(CLASS_TITLES[c] for c in CLASS_ORDER) + " | context check |",
                  "|---|" + "---|" * (len(CLASS_ORDER) + 1)]
        for r in rows:
            if r.status == "unavailable":
                lines.append(f"| {r.label} | " + " | ".join("unavailable" for _ in CLASS_ORDER) + f" | {r.reason} |")
                continue
            cells = [_cell(r.tallies.get(c)) for c in CLASS_ORDER]
            sanity = r.sanity or {}
            check = "passed" if sanity.get("passed") else ("FAILED" if sanity else "—")
            if r.status not in ("ok", "unavailable"):
                check += f"; {r.status}: " + (r.reason or "").splitlines()[0][:160]
            lines.append(f"| {r.label} | " + " | ".join(cells) + f" | {check} |")
        lines.append("")
        for r in rows:
            if r.status != "unavailable" and r.timings_s:
                facts = r.engine or {}
                lines.append(f"- {r.label}: startup {r.startup_s:.0f} s, classes "
                             + ", ".join(f"{c} {s:.1f} s" for c, s in r.timings_s.items())
                             + (f"; block_size {facts.get('block_size')}, dtype {facts.get('dtype')}" if facts else ""))
        lines.append("")
    shown = [(r, [c for c in r.comparisons if c.run and not c.match]) for r in summary.rows]
    shown = [(r, bad) for r, bad in shown if bad]
    if shown:
        lines += ["## Mismatches (first few per mode)", "",
                  "| model | mode | class | case | first differing step | max abs diff |", "|---|---|---|---|---|---|"]
        for r, bad in shown:
            for c in bad[:6]:
                lines.append(f"| {r.model} | {r.label} | {CLASS_TITLES[c.cls]} | {c.case} | "
                             f"{c.first_divergence} | {c.max_abs_diff:.3g} |")
        lines.append("")
    not_run = [(r, c) for r in summary.rows for c in r.comparisons if not c.run]
    if not_run:
        lines += ["Not run: " + "; ".join(f"{r.model}/{r.mode} {c.case} ({c.not_run_reason})"
                                          for r, c in not_run[:12]), ""]
    if summary.online:
        lines += ["## Online (`vllm serve`, concurrent vs one by one)", "",
                  "| mode | matches / requests | concurrent s | sequential s | status |", "|---|---|---|---|---|"]
        for o in summary.online:
            lines.append(f"| {o.mode} | {o.matches}/{o.compared} | {o.concurrent_s:.1f} | {o.sequential_s:.1f} | "
                         f"{o.status}{': ' + o.reason if o.reason else ''} |")
        lines.append("")
    lines += ["Files: `summary.json` (these tallies, timings and first mismatches), `results.json` (every "
              "comparison, first divergence, max |diff|, chunk sizes, cache hits), `match_rate.png`, `raw/` (each "
              "mode's evidence, floats as hex), `logs/`; only results.md and summary.json are kept in git.", ""]
    return "\n".join(lines)


MISMATCHES_KEPT = 6


def compact(data: dict) -> dict:
    """The numbers results.md shows, from a results.json dict: per model and mode the tallies per class,
    status, context check, timings, engine facts and the first few mismatches (no per-case evidence)."""
    rows = []
    for row in data["rows"]:
        kept = {k: v for k, v in row.items() if k != "comparisons"}
        kept["mismatches"] = [{k: c[k] for k in ("cls", "case", "first_divergence", "max_abs_diff")}
                              for c in row.get("comparisons", []) if c["run"] and not c["match"]][:MISMATCHES_KEPT]
        rows.append(kept)
    online = [{k: v for k, v in o.items() if k != "mismatches"} for o in data.get("online", [])]
    return {"kind": "harness", **{k: data.get(k) for k in ("command", "scale", "device", "vllm_version", "top_k")},
            "rows": rows, "online": online}


def write_json(summary, command: str, path: Path) -> None:
    """results.json (every comparison; raw, git-ignored under integration/results) and summary.json beside it."""
    data = {
        "command": command, "scale": summary.scale, "device": summary.device,
        "vllm_version": summary.vllm_version, "top_k": summary.top_k,
        "rows": [r.to_json() for r in summary.rows],
        "online": [o.__dict__ for o in summary.online],
    }
    path.write_text(json.dumps(data, indent=1))
    (path.parent / "summary.json").write_text(dumps(compact(data)) + "\n")


def plot(summary, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    models = summary.models
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = [r for r in summary.rows if r.model == model]
        shown = [r for r in rows if r.status != "unavailable"]
        width = 0.8 / max(1, len(shown))
        for i, r in enumerate(shown):
            xs, ys, labels = [], [], []
            for j, c in enumerate(CLASS_ORDER):
                t = r.tallies.get(c)
                if t is None or not t.compared:
                    continue
                xs.append(j + (i - (len(shown) - 1) / 2) * width)
                ys.append(t.rate)
                labels.append(f"{t.matches}/{t.compared}")
            bars = ax.bar(xs, ys, width, label=r.label, color=MODE_COLORS.get(r.mode))
            for b, text in zip(bars, labels):
                ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                            fontsize=7, rotation=90 if len(shown) > 2 else 0)
        missing = [r.label for r in rows if r.status == "unavailable"]
        if missing:
            ax.text(0.01, 0.98, "unavailable here: " + "; ".join(missing), transform=ax.transAxes,
                    fontsize=7, va="top")
        ax.set_xticks(range(len(CLASS_ORDER)), [CLASS_TITLES[c] for c in CLASS_ORDER], fontsize=8)
        ax.set_ylim(0, 1.25)
        ax.set_ylabel("bitwise match rate")
        ax.set_title(f"{model} ({summary.scale} scale)")
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
