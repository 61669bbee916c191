"""Write RUN_DIR/summary.json, the compact form of a run that git keeps, from the run's raw output.

    python -m vosti_plugin.integration.summarize_run RUN_DIR [RUN_DIR ...] [--keep-config "m64 n64 s512 w4 st2" ...]

What it reads in RUN_DIR (all of it git-ignored under integration/results):
  results.json            vosti_plugin.integration.harness            -> tallies per model/mode/class, first mismatches
  tp_*.json, ag_*.json    vosti_plugin.integration.bench.throughput / agentic -> every cell's tok/s, session means
  tall_gemm.json          integration/gpu/tall_gemm_check.py -> bits per GEMM and M, timings
  attention_sweep.json    integration/gpu/attention_sweep.py -> shipped, checked and fastest configs per case
  att.json, dense.json    integration/gpu/attention_check.py, dense_bench.py -> pass/fail per property, GEMM timings
  decode_*.json, prof_*.json  integration/gpu/profile_decode.py -> per-step time per kernel family
  decode_gemm_sweep.json  integration/gpu/decode_gemm_sweep.py -> per shape: cuBLAS, the shipped config, its
                          mid-row tiles and the fastest config with the shipped splits (the same bits)
  decode_gemm_paths.json  decode_gemm_sweep.py --paths -> per shape and M: each launch path's µs, bits vs decode
The harness and `vosti_plugin.integration.bench.report` write summary.json themselves; this rebuilds it for any run.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

from vosti_plugin.integration.bench import report as bench_report
from vosti_plugin.integration.harness import report as harness_report
from vosti_plugin.integration.summary_json import dumps

FASTEST_KEPT = 2
_round = bench_report._round


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def harness(run: Path) -> dict | None:
    path = run / "results.json"
    return harness_report.compact(_load(path)) if path.exists() else None


def bench(run: Path) -> dict | None:
    tp, ag = sorted(run.glob("tp_*.json")), sorted(run.glob("ag_*.json"))
    return bench_report.compact([_load(p) for p in tp], [_load(p) for p in ag]) if tp or ag else None


def tall_gemm(run: Path) -> dict | None:
    path = run / "tall_gemm.json"
    if not path.exists():
        return None
    data = _load(path)
    bits = data["sections"].get("bits", {})
    cases = [{"gemms": c["gemms"], "M": c["M"], "N": c["N"], "K": c["K"],
              **{k: c[k]["n"] for k in ("bad_rows", "bad_rows_bias", "decode_bad_rows") if k in c},
              "decode_rows_checked": c.get("decode_bad_rows", {}).get("checked")}
             for c in bits.get("cases", [])]
    timing = [{k: t[k] for k in ("gemms", "M", "N", "K", "split_k", "current_us", "tall_us", "cublas_us",
                                 "tall_speedup", "tall_over_cublas")} for t in data["sections"].get("timing", [])]
    return _round({"kind": "tall_gemm", "env": data.get("env"), "bits_pass": data.get("bits_pass"),
                   "failures": bits.get("failures", []), "controls": bits.get("controls", {}),
                   "bits": cases, "timing": timing, "errors": data.get("errors", {})}, 5)


def attention_sweep(run: Path, keep_configs: tuple[str, ...] = ()) -> dict | None:
    """Measurements of the shipped configs, the configs the sweep checked bitwise, `keep_configs` (e.g. the
    one a run adopted) and the fastest few per case and path: {geometry: {case: [[config, path, ms, % of HBM]]}}."""
    path = run / "attention_sweep.json"
    if not path.exists():
        return None
    data = _load(path)
    keep = {(g, s["config"]) for g, s in data.get("shipped", {}).items()}
    keep |= {(g, c["config"]) for g, checks in data.get("checks", {}).items() for c in checks}
    keep |= {(g["name"], c) for g in data["plan"]["geometries"] for c in keep_configs}
    groups: dict[tuple, list] = {}
    for m in data["measurements"]:
        if m.get("ms") is not None:
            groups.setdefault((m["geometry"], m["case"], m["path"]), []).append(m)
    rows: dict[str, dict[str, list]] = {}
    for (geometry, case, _), ms in groups.items():
        fastest = {id(m) for m in sorted(ms, key=lambda m: m["ms"])[:FASTEST_KEPT]}
        rows.setdefault(geometry, {}).setdefault(case, []).extend(
            [m["config"], m["path"], m["ms"], m.get("pct_hbm")]
            for m in ms if id(m) in fastest or (geometry, m["config"]) in keep)
    checks = {g: [{"config": c["config"], "pass": c["pass"], "bitwise_pairs": c["bitwise_pairs"],
                   "bitwise_mismatches": len(c["bitwise_mismatches"]),
                   "reference_max_abs_err": c["reference_max_abs_err"]} for c in cs]
              for g, cs in data.get("checks", {}).items()}
    cross = {g: {"pairs": len(cs), "bitwise_equal": sum(c["bitwise_equal"] for c in cs)}
             for g, cs in data.get("cross_config", {}).items()}
    return _round({"kind": "attention_sweep", "env": data.get("env"), "geometries": data["plan"]["geometries"],
                   "shipped": {g: s["config"] for g, s in data.get("shipped", {}).items()},
                   "kept_configs": list(keep_configs), "fastest_kept_per_case": FASTEST_KEPT,
                   "measured": len(data["measurements"]), "columns": ["config", "path", "ms", "pct_hbm"],
                   "measurements": rows, "sdpa": {k: v["ms"] for k, v in data.get("sdpa", {}).items()},
                   "checks": checks, "cross_config": cross, "errors": data.get("errors")}, 5)


def attention_check(run: Path) -> dict | None:
    path = run / "att.json"
    if not path.exists():
        return None
    data = _load(path)
    props = {geometry: {"config": p.get("config"),
                        **{name: {k: v for k, v in r.items() if k in ("pass", "mismatched_rows", "compared_rows",
                                                                      "max_abs_err", "max_abs_diff")}
                           for name, r in p.items() if isinstance(r, dict) and "pass" in r}}
             for geometry, p in data["properties"].items()}
    timings = {k: {f: v[f] for f in ("best_ms", "ms", "pct_of_4.3TBps") if f in v}
               for k, v in data.get("timings", {}).items()}
    return _round({"kind": "attention_check", "env": data.get("env"), "properties": props, "timings": timings,
                   "summary": data.get("summary"), "errors": data.get("errors")}, 5)


def dense(run: Path) -> dict | None:
    path = run / "dense.json"
    if not path.exists():
        return None
    data = _load(path)
    sections = data["sections"]
    bench_rows = [{k: b[k] for k in ("gemm", "N", "K", "M", "vosti_us", "cublas_us", "floor_us")}
                  | {"split_k": b["config"]["split_k"]} for b in sections.get("bench", [])]
    return _round({"kind": "dense", "env": data.get("env"), "invariance_pass": data.get("invariance_pass"),
                   "invariance": {k: v["ok"] for k, v in sections.get("invariance", {}).items()},
                   "accuracy": sections.get("accuracy"), "bench": bench_rows,
                   "bench_summary": data.get("bench_summary"), "errors": data.get("errors")}, 5)


def profile(run: Path) -> dict | None:
    paths = sorted(p for pattern in ("decode_*.json", "prof_*.json") for p in run.glob(pattern)
                   if p.name not in ("decode_gemm_sweep.json", "decode_gemm_paths.json"))
    if not paths:
        return None
    return _round({"kind": "profile", "runs": {p.stem: _load(p) for p in paths}}, 5)


def _config_name(c: dict) -> str:
    """A GEMM launch config in a few characters: "m16 n32 k128 s2 st4" (+ " sk256" when split lengths round
    to something other than block_k)."""
    name = f"m{c['block_m']} n{c['block_n']} k{c['block_k']} s{c['split_k']} st{c['num_stages']}"
    name += f" w{c['num_warps']}" if c["num_warps"] != 4 else ""
    return name + (f" sk{c['split_block_k']}" if c["split_block_k"] else "")


def _fastest(rows: list[dict], m: str) -> list:
    best = min(rows, key=lambda r: r["us"][m])
    return [_config_name(best["config"]), best["us"][m]]


def _same_splits(a: dict, b: dict) -> bool:
    """Whether two GEMM configs cut K at the same boundaries (and so give a row the same bits on the GPU)."""
    if a["split_k"] != b["split_k"]:
        return False
    return a["split_k"] == 1 or (a["split_block_k"] or a["block_k"]) == (b["split_block_k"] or b["block_k"])


def decode_gemm_sweep(run: Path) -> dict | None:
    """Per layer shape: cuBLAS, the shipped config, its mid-row tiles (`matmul.mid_config`) and the fastest config
    with the shipped splits (the same bits); µs per M."""
    from vosti_plugin.ops.matmul import MatmulConfig, mid_config

    path = run / "decode_gemm_sweep.json"
    if not path.exists():
        return None
    data = _load(path)
    ms = [str(m) for m in data["m"]]
    shapes, timed, unequal = [], 0, 0
    for shape in data["shapes"]:
        rows, shipped = shape["rows"], next((r for r in shape["rows"] if r.get("shipped")), None)
        timed += len(rows)
        unequal += sum(not r.get("bits_equal_tall", True) for r in rows)
        same = [r for r in rows if shipped and _same_splits(r["config"], shipped["config"])] or rows
        mid = shipped and dataclasses.asdict(mid_config(MatmulConfig(**shipped["config"])))
        mid_row = next((r for r in rows if r["config"] == mid), None)
        shapes.append({"N": shape["N"], "K": shape["K"], "cublas_us": shape["cublas_us"],
                       "shipped": shipped and [_config_name(shipped["config"]), shipped["us"]],
                       "mid": mid_row and [_config_name(mid), mid_row["us"]],
                       "same_splits": {m: _fastest(same, m) for m in ms}})
    return _round({"kind": "decode_gemm_sweep", "m": data["m"], "device": data.get("device"), "configs_timed": timed,
                   "unequal_to_tall": unequal, "shapes": shapes}, 4)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def decode_gemm_paths(run: Path) -> dict | None:
    """Per layer shape: the shipped config and µs per M through cuBLAS and each launch path; the (N, K, path) whose
    rows differ from the decode rows; per M and path, the geometric mean of its time over the decode tiles' and
    cuBLAS's."""
    path = run / "decode_gemm_paths.json"
    if not path.exists():
        return None
    data = _load(path)
    ms = [str(m) for m in data["m"]]
    paths = [p for p in data["shapes"][0]["us"] if p != "cublas"]
    shapes = [{"N": sh["N"], "K": sh["K"], "config": _config_name(sh["config"]),
               "us": {p: [sh["us"][p][m] for m in ms] for p in sh["us"]}} for sh in data["shapes"]]
    unequal = [[sh["N"], sh["K"], p] for sh in data["shapes"] for p, ok in sh["bits_equal_decode"].items() if not ok]
    over = {p: {m: {ref: _geomean([sh["us"][p][m] / sh["us"][ref][m] for sh in data["shapes"]])
                    for ref in ("decode", "cublas")} for m in ms} for p in paths}
    return _round({"kind": "decode_gemm_paths", "m": data["m"], "device": data.get("device"),
                   "rows_unequal_to_decode": unequal, "geomean_over": over, "shapes": shapes}, 3)


SUMMARIES = (harness, bench, tall_gemm, attention_sweep, attention_check, dense, profile, decode_gemm_sweep,
             decode_gemm_paths)


def summarize(run: Path, keep_configs: tuple[str, ...] = ()) -> dict:
    found = [s for s in (f(run, keep_configs) if f is attention_sweep else f(run) for f in SUMMARIES) if s]
    if not found:
        raise SystemExit(f"{run}: no raw output to summarize (results.json, tp_*.json, tall_gemm.json, ...)")
    return found[0] if len(found) == 1 else {"kind": "sections", "sections": {s["kind"]: s for s in found}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    ap.add_argument("--keep-config", action="append", default=[],
                    help="attention sweep: also keep every measurement of this config")
    a = ap.parse_args(argv)
    for run in a.runs:
        out = run / "summary.json"
        out.write_text(dumps(summarize(run, tuple(a.keep_config))) + "\n")
        print(f"{out}: {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
