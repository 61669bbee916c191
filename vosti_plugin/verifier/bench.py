"""Cold and cached whole-catalog verification time.

    python -m vosti_plugin.verifier.bench [--kernel K] [--workers N] [--json PATH]

Verifies the catalog into an empty temporary cache (cold: every group proved from scratch), then again
from that cache, and prints the number of results and groups, the statuses, both wall times, and the proof
seconds spent per kernel (the sum over its groups, whichever worker ran them).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from vosti_plugin.verifier.api import catalog_plan, verify_catalog


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vosti_plugin.verifier.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default=None, help="only kernels whose name contains this (or this family)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    ap.add_argument("--json", dest="json_path", default=None, help="also write the numbers as JSON")
    args = ap.parse_args(argv)
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
