"""Cold and cached whole-catalog verification time.

    python -m vosti_plugin.verifier.bench [--kernel K] [--workers N] [--json PATH]
    python -m vosti_plugin.verifier.bench --kernel K --sample N

Verifies the catalog into an empty temporary cache (cold: every group proved from scratch), then again
from that cache, and prints the number of results and groups, the statuses, both wall times, and the proof
seconds spent per kernel (the sum over its groups, whichever worker ran them).

With --sample N it proves only the kernel's first N groups, one after another, reading and writing no cache,
and prints each one's seconds: what an edit to a kernel does to its proofs' cost, in a minute instead of the
whole catalog's minutes (run it before and after the edit).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from vosti_plugin.verifier.api import _run_group, catalog_plan, verify_catalog


def measure(kernel: str | None = None, workers: int | None = None) -> dict:
    groups, _rejected = catalog_plan(kernel)
    with tempfile.TemporaryDirectory(prefix="vosti-verify-cold-") as tmp:
        t0 = time.perf_counter()
        cold = verify_catalog(kernel=kernel, cache_dir=Path(tmp), workers=workers)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        cached = verify_catalog(kernel=kernel, cache_dir=Path(tmp), workers=workers)
        cached_s = time.perf_counter() - t0
    per_kernel: dict[str, float] = defaultdict(float)
    for r in cold:
        per_kernel[r.kernel] += r.seconds
    return {"results": len(cold), "groups": len(groups), "statuses": dict(Counter(r.status for r in cold)),
            "cold_seconds": round(cold_s, 2), "cached_seconds": round(cached_s, 3),
            "cached_all": all(r.cached for r in cached) and len(cached) == len(cold),
            "workers": workers if workers is not None else os.cpu_count(), "cpu_count": os.cpu_count(),
            "proof_seconds_per_kernel": {k: round(v, 2) for k, v in sorted(per_kernel.items(),
                                                                         key=lambda kv: -kv[1])}}


def sample(kernel: str | None, count: int) -> list[dict]:
    """The first `count` groups of the selected kernels proved cold in this process, each timed."""
    groups, _rejected = catalog_plan(kernel)
    rows = []
    for g in groups[:count]:
        out = _run_group(g.task)
        rows.append({"kernel": g.kernel, "goal": g.goal, "configs": len(g.members), "status": out["status"],
                     "obligations_proved": out["proved"], "seconds": round(out["seconds"], 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vosti_plugin.verifier.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default=None, help="only kernels whose name contains this (or this family)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    ap.add_argument("--json", dest="json_path", default=None, help="also write the numbers as JSON")
    ap.add_argument("--sample", type=int, default=None, metavar="N",
                    help="prove only the first N groups, cold and one by one, without the cache; print each one's time")
    args = ap.parse_args(argv)
    if args.sample is not None:
        if args.sample < 1:
            ap.error("--sample takes a number of groups, 1 or more")
        rows = sample(args.kernel, args.sample)
        if not rows:
            ap.error(f"no catalog kernel matches --kernel {args.kernel!r}")
        for r in rows:
            print(f"{r['kernel']} {r['goal']} ({r['configs']} configs): {r['status']}, "
                  f"{r['obligations_proved']} obligations, {r['seconds']:.2f} s")
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(rows, indent=2))
        return 0 if all(r["status"] == "proved" for r in rows) else 1
    m = measure(args.kernel, args.workers)
    print(f"cold catalog verification: {m['cold_seconds']:.2f} s  ({m['results']} results, {m['groups']} groups, "
          f"{m['workers']} workers on {m['cpu_count']} cores)")
    print(f"cached re-check: {m['cached_seconds']:.3f} s  (all cached: {m['cached_all']})")
    print("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(m["statuses"].items())))
    for k, v in m["proof_seconds_per_kernel"].items():
        print(f"  {k:36s} {v:8.2f} s of proofs")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(m, indent=2))
    return 0 if set(m["statuses"]) <= {"proved"} else 1


if __name__ == "__main__":
    raise SystemExit(main())
