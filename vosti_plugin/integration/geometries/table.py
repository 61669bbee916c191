"""Launch-check table over real geometries: accepted or refused (with the root causes), and the check's time.

    python -m vosti_plugin.integration.geometries.table [--models a,b] [--platform cuda] [--out DIR] [-- vLLM args...]

Each geometry is written as a config.json and checked as `vllm serve DIR --attention-backend vosti
--load-format dummy` would check it on this machine (the offline check, the same obligations as a real
launch). The first check in the process also pays for proving any config the cached proofs lack.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from vosti_plugin.integration.geometries import GEOMETRIES


def check_geometry(name: str, root: Path, vllm_args: list[str], platform: str | None = None) -> dict:
    from vosti_plugin.launch.offline import check_model

    model = root / name
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(GEOMETRIES[name], indent=1))
    t0 = time.perf_counter()
    try:
        facts, statuses = check_model(str(model), ["--load-format", "dummy", "--skip-tokenizer-init", *vllm_args],
                                      platform=platform)
    except Exception as exc:        # vLLM itself refused the config: report it, keep going
        return {"model": name, "accepted": False, "seconds": round(time.perf_counter() - t0, 2),
                "causes": [f"vLLM: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"]}
    causes = [f"[{s.name}] {s.reason}" for s in statuses if s.cause]
    return {"model": name, "accepted": not causes, "seconds": round(time.perf_counter() - t0, 2),
            "platform": facts.platform, "dtype": facts.dtype, "head_size": facts.head_size,
            "queries_per_kv": facts.num_q_heads // max(1, facts.num_kv_heads), "causes": causes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=",".join(GEOMETRIES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--platform", default=None, help="cuda: check GPU launches from a CPU-only machine")
    ap.add_argument("vllm_args", nargs="*")
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="vosti-geometries-") as tmp:
        for name in a.models.split(","):
            row = check_geometry(name, Path(tmp), a.vllm_args, a.platform)
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = ["| model | head dim | q per kv | accepted | check s | why not |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r.get('head_size', '')} | {r.get('queries_per_kv', '')} | "
                     f"{'yes' if r['accepted'] else 'no'} | {r['seconds']} | {'; '.join(r['causes'])[:200]} |")
    print("\n".join(lines))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "geometries.json").write_text(json.dumps(rows, indent=1))
        (a.out / "geometries.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["accepted"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
