"""A prefill forward's GEMMs back to back on a CUDA GPU, host launch cost included: the tall path's TMA kernel,
its pointer kernels (the default), an earlier matmul module (--old FILE, e.g. `git show REV:vosti_plugin/ops/
matmul.py`), and cuBLAS.

    python integration/gpu/prefill_gemm_sequence.py --out $OUT/prefill_seq.json [--old .stage/old_matmul.py]

Per path and M: `wall` is one forward's 32 layers x (qkv, o, gate_up, down) of Llama-3.1-8B timed from the first
launch to the GPU finishing (so a host-bound path shows), `host` the time the launches took to enqueue, and
`gpu` the same sequence timed with CUDA events after a warm-up. The microbenchmarks (tall_gemm_check,
tall_variants) time one GEMM at a time; this shows whether the sum holds inside a forward.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import torch  # noqa: E402

LAYERS = 32
SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
M_VALUES = (512, 2048, 4096, 16384)


def _old_module(path: str):
    spec = importlib.util.spec_from_file_location("vosti_plugin.ops._old_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _forward(linear, xs, ws):
    for _ in range(LAYERS):
        for name in SHAPES:
            linear(xs[name], ws[name])


def _time(linear, xs, ws) -> dict:
    _forward(linear, xs, ws)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    _forward(linear, xs, ws)
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    _forward(linear, xs, ws)
    end.record()
    torch.cuda.synchronize()
    return {"wall_ms": wall * 1e3, "host_ms": host * 1e3, "gpu_ms": start.elapsed_time(end)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--old", default="", help="an earlier vosti_plugin/ops/matmul.py to compare with")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    from vosti_plugin.ops import matmul

    paths = {"ptr": matmul.linear, "cublas": torch.nn.functional.linear}
    if args.old:
        paths["old"] = _old_module(args.old).linear
    gen = torch.Generator(device="cuda").manual_seed(0)
    ws = {n: (torch.randn(N, K, generator=gen, device="cuda") / math.sqrt(K)).bfloat16() for n, (N, K) in SHAPES.items()}
    rows = []
    for M in M_VALUES:
        xs = {n: torch.randn(M, K, generator=gen, device="cuda").bfloat16() for n, (_N, K) in SHAPES.items()}
        row = {"M": M}
        for name, fn in list(paths.items()) + [("tma", matmul.linear)]:
            os.environ["VOSTI_TMA_GEMM"] = "1" if name == "tma" else "0"
            row[name] = _time(fn, xs, ws)
        os.environ.pop("VOSTI_TMA_GEMM", None)
        rows.append(row)
        print(f"M={M:6d} " + "  ".join(f"{k}: wall {v['wall_ms']:.1f} gpu {v['gpu_ms']:.1f} host {v['host_ms']:.1f} ms"
                                       for k, v in row.items() if k != "M"), flush=True)
        del xs
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"layers": LAYERS, "shapes": SHAPES, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
