"""What the H200's compiler makes of vosti's kernel launches, read on a machine without a GPU.

    python -m vosti_plugin.integration.sm90_static [--geometries llama31-8b,gemma3-4b] [--variants "a;b"] \
        [--out report.json]

Every launch a served geometry makes in a layer (paged attention for chunked prefill and decode, the combine,
each linear layer's decode and prefill GEMMs) goes through the plugin's own launch code with CPU tensors of the
real shapes, so Triton specializes the kernel exactly as on the GPU (constexprs, 16-byte divisibility of
pointers and strides), and is compiled for sm_90a instead of launched. From the cubin: registers per thread,
spill (local memory) bytes, shared memory, resident CTAs per SM and what bounds them, and SASS counts that say
whether the kernel runs on the Hopper paths (HGMMA: wgmma; LDGSTS: cp.async; UTMALDG: TMA loads; MUFU: exp2 and
friends). Compile times are cold (a fresh Triton cache) on this host's CPU: what a first GPU launch pays on its
host for the same kernel.

This is a static profile: it cannot say how fast a kernel runs, only what the compiler gave it, so it tells
which variants are worth a lease (`integration/gpu/attention_variants.py` measures them). The H200 image runs
Triton 3.6.0; a different Triton here compiles differently, so install that one beside the plugin's:
`pip install --target /tmp/triton36 triton==3.6.0` and run with `PYTHONPATH=/tmp/triton36`.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction

# sm_90 resources per SM (CUDA occupancy rules: registers are allocated per warp in units of 256)
SM90 = {"regs": 65536, "shared": 233472, "shared_per_cta_reserved": 1024, "threads": 2048, "ctas": 32}
SASS_OPS = ("HGMMA", "HMMA", "LDGSTS", "UTMALDG", "LDG", "STG", "MUFU", "STL", "LDL", "BAR")


class _CompileOnlyDriver:
    """Stands in for the CUDA driver: the target is an H200's, and a launch stops after the compile."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")


@dataclasses.dataclass
class Compiled:
    kernel: str
    num_warps: int
    num_stages: int
    shared: int
    seconds: float
    cubin: bytes


class CompileOnly:
    """Within this context every Triton launch compiles for sm_90a and returns without running."""

    def __init__(self) -> None:
        self.compiled: list[Compiled] = []

    def __enter__(self) -> "CompileOnly":
        self._run = JITFunction.run
        outer = self

        def run(fn, *args, grid, warmup, **kwargs):
            t0 = time.perf_counter()
            k = outer._run(fn, *args, grid=grid, warmup=True, **kwargs)
            outer.compiled.append(Compiled(fn.fn.__name__, k.metadata.num_warps, k.metadata.num_stages,
                                           k.metadata.shared, time.perf_counter() - t0, k.asm["cubin"]))
            return k

        JITFunction.run = run
        self._driver = driver._active   # None on a host without a GPU driver
        driver.set_active(_CompileOnlyDriver())
        return self

    def __exit__(self, *exc) -> None:
        JITFunction.run = self._run
        driver._active = self._driver


def _nvidia_tool(name: str) -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def cubin_facts(c: Compiled) -> dict:
    """Registers, spills and SASS counts of a compiled kernel, and its resident CTAs per SM."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(c.cubin)
        f.flush()
        usage = subprocess.run([_nvidia_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([_nvidia_tool("cuobjdump"), "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    stack = int(re.search(r"STACK:(\d+)", usage).group(1))
    instructions = [(int(m.group(1), 16), m.group(2), m.group(3) or "") for m in
                    re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[^;]*?(?:0x([0-9a-f]+))?\s*;",
                                sass)]
    ops = collections.Counter(op for _a, op, _t in instructions)
    return {"kernel": c.kernel, "warps": c.num_warps, "stages": c.num_stages, "regs": regs, "stack_bytes": stack,
            "shared_kb": round(c.shared / 1024, 1), **occupancy(regs, c.shared, c.num_warps),
            "sass": sum(ops.values()), **{op.lower(): ops.get(op, 0) for op in SASS_OPS},
            "mma_loops": mma_loops(instructions), "compile_s": round(c.seconds, 2)}


def mma_loops(instructions: list[tuple[int, str, str]]) -> list[dict]:
    """Per iteration of each loop that issues matrix instructions (a backward branch's range): the instruction
    count per warp and how many of them are MMA, MUFU, async copies and selects; the rest is the issue cost
    that the MMA does not hide within one warp."""
    index = {addr: i for i, (addr, _op, _t) in enumerate(instructions)}
    loops = []
    for i, (addr, op, target) in enumerate(instructions):
        if op != "BRA" or not target or int(target, 16) >= addr or int(target, 16) not in index:
            continue
        body = collections.Counter(o for _a, o, _t in instructions[index[int(target, 16)]:i + 1])
        if body["HGMMA"] or body["HMMA"]:
            loops.append({"instr": sum(body.values()), "mma": body["HGMMA"] + body["HMMA"], "mufu": body["MUFU"],
                          "copies": body["LDGSTS"] + body["UTMALDG"], "fsel": body["FSEL"],
                          "spill": body["STL"] + body["LDL"]})
    return loops


def occupancy(regs: int, shared: int, warps: int) -> dict:
    """Resident CTAs per SM on sm_90 and the resource that bounds them."""
    regs_per_warp = -(-max(regs, 1) * 32 // 256) * 256
    bounds = {"registers": (SM90["regs"] // regs_per_warp) // warps,
              "shared": SM90["shared"] // (shared + SM90["shared_per_cta_reserved"]),
              "threads": SM90["threads"] // (32 * warps), "ctas": SM90["ctas"]}
    limit = min(bounds, key=bounds.get)
    return {"ctas_per_sm": bounds[limit], "bound_by": limit, "warps_per_sm": bounds[limit] * warps}


def geometry_shapes(name: str) -> dict:
    """Attention heads, head dim, window and soft cap, and every linear layer's (N, K) as the launch check sees
    them (`launch.verified.linear_shapes`), of a served geometry."""
    from vosti_plugin.integration.geometries import GEOMETRIES
    from vosti_plugin.launch.facts import LaunchFacts
    from vosti_plugin.launch.verified import linear_shapes

    cfg = GEOMETRIES[name]
    cfg = cfg.get("text_config", cfg)
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    facts = LaunchFacts(model=name, architecture=cfg["architectures"][0], dtype="bfloat16", head_size=hd,
                        num_q_heads=cfg["num_attention_heads"], num_kv_heads=cfg["num_key_value_heads"],
                        num_layers=cfg["num_hidden_layers"], hidden_size=cfg["hidden_size"],
                        intermediate_size=cfg["intermediate_size"], vocab_size=cfg["vocab_size"],
                        sliding_window=cfg.get("sliding_window"), page_size=64, max_model_len=8192 + 512,
                        max_num_batched_tokens=2048, max_num_seqs=16, num_gpu_blocks=None, platform="cuda")
    return {"heads": (facts.num_q_heads, facts.num_kv_heads, hd), "window": facts.sliding_window,
            "soft_cap": cfg.get("attn_logit_softcapping"), "linear": linear_shapes(facts)}


def attention_cases(name: str, page: int = 64) -> list[tuple[str, dict]]:
    """(case, paged_attention arguments) for a 2048-token chunk at 8K and decode of 4 sequences at 8K."""
    from vosti_plugin.attention.paged_batch import build_paged_batch, random_request

    shapes = geometry_shapes(name)
    hq, hkv, hd = shapes["heads"]
    kinds = [("", None)] if not shapes["window"] else [(", window", shapes["window"]), (", global", None)]
    prefill = build_paged_batch([random_request(8192, 2048, hq, hkv, hd, seed=1, dtype=torch.bfloat16,
                                                device="cpu")], page_size=page, seed=7)
    decode = build_paged_batch([random_request(8192, 1, hq, hkv, hd, seed=2 + s, dtype=torch.bfloat16, device="cpu")
                                for s in range(4)], page_size=page, seed=7)
    out = []
    for label, window in kinds:
        for case, batch, path in (("prefill 2048 @ 8K", prefill, "split"), ("prefill 2048 @ 8K fused", prefill, "fused"),
                                  ("decode b4 @ 8K", decode, "split")):
            out.append((case + label, {"batch": batch, "path": path, "window": window, "soft_cap": shapes["soft_cap"],
                                       "decode": case.startswith("decode")}))
    return out


def _attention_launch(module, launch: tuple, case: dict) -> None:
    """launch: (config, path, FOLD config or None)."""
    b = case["batch"]
    config, path, fold = launch
    module.paged_attention(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.query_start_loc, b.empty_out(),
                           scale=b.q.shape[2] ** -0.5, config=config, sliding_window=case["window"],
                           soft_cap=case["soft_cap"], max_seqlen_k=b.seq_lens.max().item() + 512, path=path,
                           **({"fold": fold} if fold is not None else {}))


def _gemm_launch(n: int, k: int, m: int, block_m: int = 0) -> None:
    """The layer's launch at m rows; block_m (decode launches only) replaces its activation tile height."""
    from vosti_plugin.ops import matmul as mm

    a = torch.zeros(m, k, dtype=torch.bfloat16)
    w = torch.zeros(n, k, dtype=torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    config = mm.select_config(n, k, torch.bfloat16)
    if block_m:
        config = dataclasses.replace(config, block_m=block_m)
    if mm.tall_path_on(m, torch.bfloat16) and not block_m:
        mm.launch_tall(a, w.t(), None, out, config)
    else:
        mm.launch_matmul(a, w.t(), None, out, config)


def _variant_modules(names: list[str]) -> dict:
    """name -> (attention module, its launch (config, path, FOLD config) from the shipped config and the case): the
    shipped module and the named variants of integration/gpu/attention_variants.py."""
    from vosti_plugin.attention import paged_attention as shipped

    mods = {"shipped": (shipped, lambda base, case: (base, case["path"], None))}
    if not names:
        return mods
    av = _attention_variants()

    unknown = set(names) - set(av.VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {sorted(av.VARIANTS)}")
    tmp = tempfile.mkdtemp(prefix="vosti-sm90-variants-")
    for name in names:
        spec = av.VARIANTS[name]
        fields = spec[2] if len(spec) > 2 else {}
        mods[name] = (av.load_variant(name, spec[0], tmp),
                      lambda base, case, fields=fields: av.variant_launch(
                          base, fields, case["path"], "decode" if case["decode"] else "prefill",
                          case["batch"].q.shape[2], case["batch"].k_cache.shape[1]))
    return mods


def _attention_variants():
    """integration/gpu/attention_variants.py (a script beside the GPU tools, not a package module)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "gpu"))
    import attention_variants

    return attention_variants


def report(geometries: list[str], variants: list[str], decode_rows: int = 16, gemm_rows=(4, 2048),
           gemm_block_ms=()) -> list[dict]:
    from vosti_plugin.attention.config import decode_config, select_config

    rows: list[dict] = []
    mods = _variant_modules(variants)
    for geo in geometries:
        hq, hkv, hd = geometry_shapes(geo)["heads"]
        base = select_config(hd, hq, hkv, 64, torch.bfloat16)
        for case, args in attention_cases(geo):
            for name, (module, config_of) in mods.items():
                configs = [("", config_of(base, args))]
                if name == "shipped" and args["decode"] and decode_rows:
                    configs.append((f", {decode_rows}-row decode tiles", (decode_config(base, decode_rows),
                                                                          args["path"], None)))
                for suffix, config in configs:
                    with CompileOnly() as cc:
                        try:
                            _attention_launch(module, config, args)
                        except (triton.CompilationError, RuntimeError) as e:
                            rows.append({"geometry": geo, "case": case + suffix, "variant": name,
                                         "does_not_compile": str(e)[-160:]})
                            continue
                    for c in cc.compiled:
                        rows.append({"geometry": geo, "case": case + suffix, "variant": name, **cubin_facts(c)})
                        _progress(rows[-1])
        for layer, (n, k) in geometry_shapes(geo)["linear"].items():
            decode_m = min(gemm_rows)
            for m, block_m in [(m, 0) for m in gemm_rows] + [(decode_m, b) for b in gemm_block_ms]:
                with CompileOnly() as cc:
                    _gemm_launch(n, k, m, block_m)
                for c in cc.compiled:
                    rows.append({"geometry": geo, "case": f"{layer} {n}x{k}, M={m}",
                                 "variant": f"{block_m}-row activation tiles" if block_m else "shipped",
                                 **cubin_facts(c)})
                    _progress(rows[-1])
    return rows


def _progress(row: dict) -> None:
    loops = " ".join(f"{loop['instr']}/{loop['mma']}" for loop in row["mma_loops"])   # instructions / MMAs
    print(f"{row['geometry']:12s} {row['case']:44s} {row['variant'][:28]:28s} {row['kernel'][:34]:34s} "
          f"regs {row['regs']:3d} spill {row['stack_bytes']:4d} B  smem {row['shared_kb']:6.1f} KB  "
          f"{row['ctas_per_sm']} CTA/SM ({row['bound_by']})  hgmma {row['hgmma']} hmma {row['hmma']} ldgsts {row['ldgsts']} "
          f"tma {row['utmaldg']}  loops {loops or '-'}  {row['compile_s']:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vosti_plugin.integration.sm90_static",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--geometries", default="llama31-8b,gemma3-4b", help="comma list of integration geometries")
    ap.add_argument("--variants", default="", help="attention_variants.py names, ';'-separated")
    ap.add_argument("--gemm-block-m", default="",
                    help="comma list of activation tile heights to compile the decode GEMMs with besides the "
                         "shipped 64 (e.g. 16: mma.sync instead of wgmma, smaller shared-memory stages)")
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET"):
        ap.error("this compiles for the GPU: unset TRITON_INTERPRET")
    # cold compiles (the times in the rows are a first launch's); Triton reads the variable when it compiles
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="vosti-sm90-triton-"))
    backends = triton.backends.backends
    if "nvidia" not in backends:
        ap.error(f"this Triton ({triton.__version__}) has no nvidia backend")
    variants = [v for v in args.variants.split(";") if v]
    t0 = time.time()
    rows = report([g for g in args.geometries.split(",") if g], variants,
                  gemm_block_ms=tuple(int(b) for b in args.gemm_block_m.split(",") if b))
    doc = {"triton": triton.__version__, "target": "cuda sm_90a (H200)", "command": " ".join(sys.argv),
           "seconds": round(time.time() - t0, 1), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{len(rows)} compiled launches, Triton {triton.__version__}, {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
