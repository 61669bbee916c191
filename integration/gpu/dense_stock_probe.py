"""Are STOCK dense ops row invariant? Measures vLLM's own CPU GEMM dispatch (oneDNN / sgl / F.linear
as vLLM picks it), torch mm / F.linear, vLLM's RMSNorm (+ fused add) and torch log_softmax / softmax
on the tiny CPU model shapes (or Llama-3.1-8B shapes with --llama on CUDA).

    python integration/gpu/dense_stock_probe.py [--device cpu|cuda] [--dtype float32|bfloat16] [--out probe.json]

For every op: a pool of random rows, each row computed alone (M = 1) is the reference; batches of M
rows (M = 1..512, random order) must reproduce it bit for bit. Prints, per op, whether that held and
the first M where it did not. Stock results are only measured here; vosti routes these ops through
its own kernels whenever it is selected, whatever this probe finds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import torch  # noqa: E402

TINY = {"qkv": (256, 128), "o": (128, 128), "gate_up": (512, 128), "down": (128, 256), "lm_head": (512, 128)}
LLAMA = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
         "lm_head": (128256, 4096)}
MS = list(range(1, 17)) + [31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 384, 511, 512]


def probe(fn, pool: torch.Tensor, gen: torch.Generator) -> dict:
    singles = torch.cat([fn(pool[i : i + 1]) for i in range(pool.shape[0])])
    bad_ms = []
    for M in MS:
        idx = torch.randperm(pool.shape[0], generator=gen)[:M]
        out = fn(pool[idx.to(pool.device)])
        if not torch.equal(out, singles[idx.to(pool.device)]):
            bad_ms.append(M)
    return {"row_invariant": not bad_ms, "first_bad_M": bad_ms[0] if bad_ms else None, "bad_Ms": bad_ms}


def _vllm_cpu_linear(weight: torch.Tensor):
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)
    dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
    return lambda x: layer.cpu_linear(x, layer.weight, None)


def _vllm_norms(H: int, dtype, device):
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.layernorm import GemmaRMSNorm, RMSNorm

    with set_current_vllm_config(VllmConfig()):
        norm = RMSNorm(H, eps=1e-5).to(device=device, dtype=dtype)
        gemma = GemmaRMSNorm(H, eps=1e-6).to(device=device, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(H))
        gemma.weight.copy_(torch.randn(H) * 0.1)
    return norm, gemma


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--llama", action="store_true", help="Llama-3.1-8B shapes instead of the tiny model")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    dtype, dev = getattr(torch, args.dtype), args.device
    shapes = LLAMA if args.llama else TINY
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    results: dict[str, dict] = {"env": {"torch": torch.__version__, "device": dev, "dtype": args.dtype,
                                        "threads": torch.get_num_threads()}}

    def report(name, res):
        results[name] = res
        detail = "" if res["row_invariant"] else f"  (first bad M={res['first_bad_M']}, bad Ms={res['bad_Ms'][:8]})"
        print(f"{name:34s} {'row-invariant' if res['row_invariant'] else 'VARIES'}{detail}", flush=True)

    for name, (N, K) in shapes.items():
        w = (torch.randn(N, K) / K**0.5).to(device=dev, dtype=dtype)
        pool = torch.randn(512, K).to(device=dev, dtype=dtype)
        report(f"torch F.linear {name} {N}x{K}", probe(lambda x: torch.nn.functional.linear(x, w), pool, gen))
        if dev == "cpu":
            try:
                report(f"vLLM cpu gemm {name} {N}x{K}", probe(_vllm_cpu_linear(w), pool, gen))
            except Exception as exc:  # vLLM missing or no CPU kernels
                results[f"vLLM cpu gemm {name}"] = {"error": repr(exc)}
                print(f"vLLM cpu gemm {name}: {exc!r}")
    H = shapes["o"][1]
    try:
        norm, gemma = _vllm_norms(H, dtype, dev)
        pool = torch.randn(512, 2 * H).to(device=dev, dtype=dtype)
        with torch.no_grad():
            report(f"vLLM RMSNorm {H}", probe(lambda x: norm(x[:, :H].clone()), pool, gen))
            report(f"vLLM RMSNorm+residual {H}",
                   probe(lambda x: torch.cat(norm(x[:, :H].clone(), x[:, H:].clone()), dim=1), pool, gen))
            report(f"vLLM GemmaRMSNorm {H}", probe(lambda x: gemma(x[:, :H].clone()), pool, gen))
    except Exception as exc:
        results["vLLM norms"] = {"error": repr(exc)}
        print(f"vLLM norms: {exc!r}")
    V = shapes["lm_head"][0]
    pool = (torch.randn(512, V) * 4).to(device=dev, dtype=dtype)
    report(f"torch log_softmax {V}", probe(lambda x: x.log_softmax(-1, dtype=torch.float32), pool, gen))
    report(f"torch softmax {V}", probe(lambda x: x.softmax(-1, dtype=torch.float32), pool, gen))
    report(f"torch mean {V}", probe(lambda x: x.mean(-1), pool, gen))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
