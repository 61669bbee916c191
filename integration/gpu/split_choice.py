"""What a decode GEMM's split count costs in decode and in prefill, on a CUDA GPU (#20).

    python3 integration/gpu/split_choice.py --out DIR [--shapes N:K,...|split] [--configs 1,2,4,16:1]
        [--decode-m 1,4,16] [--tall-m 2048,16384]

A row's bits follow its decode config's K order (block_k, split count, split lengths), so the split the decode
rule picks for a shape is also the one every prefill row of that shape runs: the tall path holds two
accumulators a tile for split > 1 and cannot take the column walk. For each shape and each candidate (column
tile, split) of the rule's tile base, this times the decode launch (`launch_matmul`, CUDA graphs over weight
copies past L2) at the decode batches, the tall path's launch of the same config (`launch_tall`, as a prefill
chunk runs it) at the tall row counts, and cuBLAS at both; and checks that the tall rows equal the decode rows
bit for bit. Writes DIR/split_choice.json and prints one line per shape and config.

--shapes split: every served geometry's layer shape (vosti_plugin.integration.geometries) whose decode config
splits K. A config is `S` (the shipped column tile, split S) or `BLOCK_N:S`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from integration.gpu import dense_bench  # noqa: E402
from integration.gpu.decode_gemm_sweep import _bench_operands, shapes  # noqa: E402

# Llama-3.1-8B qkv, o and down, Gemma-3-4B down, Qwen3-8B down
DEFAULT_SHAPES = "6144:4096,4096:4096,4096:14336,2560:10240,4096:12288"


def split_shapes() -> list[tuple[int, int]]:
    from vosti_plugin.ops import matmul

    return [(N, K) for N, K in shapes() if matmul.select_config(N, K, torch.bfloat16).split_k > 1]


def _tall_us(fn, reps: int = 20) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=5, rep=reps) * 1e3


def measure(N: int, K: int, candidates: list[tuple[int | None, int]], decode_ms: list[int], tall_ms: list[int]) -> dict:
    from vosti_plugin.ops import matmul

    shipped = matmul.select_config(N, K, torch.bfloat16)
    n, ws, xs, outs = _bench_operands(N, K, decode_ms)
    big = torch.randn(max(tall_ms), K, device="cuda").bfloat16()
    big_out = torch.empty(max(tall_ms), N, device="cuda", dtype=torch.bfloat16)
    timed = dense_bench._graph_time_us
    cublas = {"decode": {M: timed(lambda i, M=M: torch.matmul(xs[M], ws[i], out=outs[M]), n, reps=2)
                         for M in decode_ms},
              "tall": {M: _tall_us(lambda M=M: torch.matmul(big[:M], ws[0], out=big_out[:M])) for M in tall_ms}}
    rows = []
    for block_n, split in candidates:
        cfg = dataclasses.replace(shipped, block_n=block_n or shipped.block_n, split_k=split)
        if K // split < max(cfg.block_k, 256) or any(r["block_n"] == cfg.block_n and r["split"] == split
                                                      for r in rows):
            continue
        decode = {M: timed(lambda i, M=M: matmul.launch_matmul(xs[M], ws[i], None, outs[M], cfg), n, reps=2)
                  for M in decode_ms}
        tall = {M: _tall_us(lambda M=M: matmul.launch_tall(big[:M], ws[0], None, big_out[:M], cfg)) for M in tall_ms}
        short = torch.empty(16, N, device="cuda", dtype=torch.bfloat16)
        matmul.launch_matmul(big[:16], ws[0], None, short, cfg)
        matmul.launch_tall(big[:max(tall_ms)], ws[0], None, big_out, cfg)
        equal = torch.equal(big_out[:16].view(torch.int16), short.view(torch.int16))
        kernel, launch = matmul.launch_path(max(tall_ms), cfg, torch.bfloat16, operands=(big, ws[0]))
        cols = kernel == "tma" and matmul.tma_cols_path(N, launch, torch.bfloat16) is not None
        rows.append({"block_n": cfg.block_n, "split": split, "shipped": cfg == shipped, "decode_us": decode,
                     "tall_us": tall, "tall_rows_equal_decode": equal, "column_walk": cols})
    del ws
    torch.cuda.empty_cache()
    return {"N": N, "K": K, "shipped": vars(shipped), "cublas_us": cublas, "configs": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="N:K,... or 'split' (every served shape that splits)")
    ap.add_argument("--configs", default="1,2,4,16:1,64:1",
                    help="split or block_n:split, ...: the shipped config with these column tiles and splits")
    ap.add_argument("--decode-m", default="1,4,16")
    ap.add_argument("--tall-m", default="2048,16384")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: this measures GPU kernels", file=sys.stderr)
        return 2
    decode_ms = [int(m) for m in a.decode_m.split(",")]
    tall_ms = [int(m) for m in a.tall_m.split(",")]
    candidates = [(int(c.split(":")[0]), int(c.split(":")[1])) if ":" in c else (None, int(c))
                  for c in a.configs.split(",")]
    todo = split_shapes() if a.shapes == "split" else [tuple(int(v) for v in s.split(":")) for s in a.shapes.split(",")]
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    for N, K in todo:
        r = measure(N, K, candidates, decode_ms, tall_ms)
        results.append(r)
        cb = r["cublas_us"]
        print(f"N={N} K={K} shipped bn{r['shipped']['block_n']} s{r['shipped']['split_k']}  cuBLAS decode "
              + "/".join(f"{cb['decode'][M]:.1f}" for M in decode_ms) + "  tall "
              + "/".join(f"{cb['tall'][M]:.0f}" for M in tall_ms), flush=True)
        for c in r["configs"]:
            print(f"    bn{c['block_n']:3d} s{c['split']}{' (shipped)' if c['shipped'] else '          '} decode "
                  + "/".join(f"{c['decode_us'][M]:.1f}" for M in decode_ms) + "  tall "
                  + "/".join(f"{c['tall_us'][M]:.0f}" for M in tall_ms)
                  + f"  walk={c['column_walk']} bits={'equal' if c['tall_rows_equal_decode'] else 'DIFFER'}",
                  flush=True)
        (a.out / "split_choice.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "decode_m": decode_ms, "tall_m": tall_ms, "shapes": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
