"""Offline launch-config sweep for vosti paged attention (split and fused paths) on one GPU.

    python integration/gpu/attention_sweep.py --out $OUT/attention_sweep.json --budget-s 230
    python integration/gpu/attention_sweep.py --cpu-smoke --out /tmp/attention_sweep.json   # logic check, no GPU

What it does, within --budget-s (JSON is rewritten after every candidate, so a cut-off run still reports):
  1. builds candidate AttentionLaunchConfigs per geometry (the shipped catalog config first, then one-axis
     variations around it and around a decode-leaning and a prefill-leaning anchor, then the rest of the
     grid block_m x block_n x segment x num_warps x num_stages), keeping only configs the kernel accepts
     (powers of two, block_m a multiple of queries-per-KV, segment a multiple of block_n) and that fit
     shared memory / registers by a rough estimate;
  2. compiles them in --compile-workers spawned processes (Triton's disk cache), overlapped with timing;
  3. times every candidate on both paths for every case, as a deployment calls it: the block table is
     max_model_len wide and the segment grid comes from max_model_len (as the backend passes
     attn_metadata.max_model_len), the split workspace is preallocated and the split path is skipped
     where its workspace would exceed the backend's 2 GiB limit. Decode calls rotate over enough K/V
     copies (like successive layers) that L2 cannot hold them, inside one CUDA graph;
     decode: batch 1/4/16 x context 1K/8K/16K -> GB/s of K+V read and % of 4.3 TB/s;
     prefill: 2K/8K tokens -> TFLOP/s, plus torch SDPA on dense K/V of the same shape for reference;
  4. checks the shipped config and the best candidates: bitwise equality of rows computed alone vs inside a
     mixed 4-sequence batch, split vs fused path, and an fp64 reference (vosti_plugin.integration.reference_attention)
     within tolerance; then, informational, whether configs that differ from shipped only in block_m /
     num_warps / num_stages (same block_n and segment) give the shipped config's bits;
  5. prints the best candidate per case next to the shipped config (both paths), and the best single
     config per geometry (geomean time over all cases, relative to the shipped config's better path).

Geometries: Llama-3.1-8B (32 q / 8 kv heads, head_dim 128) and Gemma-3-4B (8 q / 4 kv heads, head_dim 256,
sliding window 1024), page 64, bf16. Exit code: 0 when every check passed, 1 when one failed, 2 on setup errors.
Nothing here is used at run time: the catalog stays a fixed table (no autotuning).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import signal
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, replace

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import torch  # noqa: E402

from integration.gpu.attention_check import Geometry  # noqa: E402
from vosti_plugin.attention.config import AttentionLaunchConfig, next_power_of_two, select_config  # noqa: E402

HBM_BYTES_PER_S = 4.3e12
SPLIT_WORKSPACE_LIMIT = 2 << 30  # vosti_plugin.attention.backend.SPLIT_WORKSPACE_BYTES["cuda"]
L2_ROTATION_BYTES = 256 << 20  # decode K/V copies per graph until this many bytes (H200 L2: 50 MB)
MAX_KV_COPIES = 32
SHARED_MEMORY_BYTES = 227 * 1024  # per block on sm_90
MAX_ACC_REGS_PER_THREAD = 256
PATHS = ("split", "fused")
MAX_COMPILE_WORKERS = 14
COMPILE_WAIT_S = 90.0  # a compile task lost with its worker must not hold up the whole run


@dataclass(frozen=True)
class Case:
    kind: str  # "decode" or "prefill"
    batch: int
    context: int  # K/V length of every sequence (decode: including the new token)

    @property
    def label(self) -> str:
        ctx = f"{self.context // 1024}K" if self.context % 1024 == 0 else str(self.context)
        return f"decode b{self.batch} {ctx}" if self.kind == "decode" else f"prefill {ctx}"

    @property
    def q_len(self) -> int:
        return 1 if self.kind == "decode" else self.context

    @property
    def num_tokens(self) -> int:
        return self.batch * self.q_len

    def kv_bytes(self, geometry: Geometry, elem: int) -> int:
        """K and V bytes the step must read at least: every key some row sees, once per KV head."""
        lo = max(0, self.context - self.q_len + 1 - geometry.window) if geometry.window else 0
        return self.batch * (self.context - lo) * geometry.kv_heads * geometry.head_dim * 2 * elem

    def flops(self, geometry: Geometry) -> float:
        """QK^T and PV multiply-adds of the causal (windowed) rows, 2 flops each."""
        first = self.context - self.q_len
        visible = sum(min(p + 1, geometry.window or p + 1) for p in range(first, self.context))
        return 4.0 * self.batch * visible * geometry.q_heads * geometry.head_dim


@dataclass(frozen=True)
class Deployment:
    """The static sizes a vLLM deployment gives the backend; the segment grid and block table follow them."""

    max_num_tokens: int
    max_model_len: int
    split_limit_bytes: int = SPLIT_WORKSPACE_LIMIT


@dataclass(frozen=True)
class Axes:
    block_m: tuple[int, ...]
    block_n: tuple[int, ...]
    segment: tuple[int, ...]
    num_warps: tuple[int, ...]
    num_stages: tuple[int, ...]


@dataclass(frozen=True)
class CheckSizes:
    targets: tuple[tuple[int, int], ...]  # (kv_len, q_len): compared alone vs in the batch
    neighbours: tuple[tuple[int, int], ...]  # batch = neighbours[0], targets..., neighbours[1:]
    reference_rows: int
    padding_rows: int


@dataclass(frozen=True)
class Plan:
    geometries: tuple[Geometry, ...]
    dtype: torch.dtype
    cases: tuple[Case, ...]
    deployment: Deployment
    axes: Axes
    max_candidates: int
    check: CheckSizes
    smoke: bool
    gpu_constraints: bool  # tl.dot on a GPU needs tiles of >= 16 rows / columns


def gpu_plan(page_size: int, max_num_tokens: int, max_candidates: int) -> Plan:
    decode = tuple(Case("decode", b, c) for b in (1, 4, 16) for c in (1024, 8192, 16384))
    prefill = (Case("prefill", 1, 2048), Case("prefill", 1, 8192))
    return Plan(
        geometries=(Geometry("llama-3.1-8b", 32, 8, 128, page_size),
                    Geometry("gemma-3-4b", 8, 4, 256, page_size, window=1024)),
        dtype=torch.bfloat16,
        cases=decode + prefill,
        deployment=Deployment(max_num_tokens=max_num_tokens, max_model_len=16384),
        axes=Axes(block_m=(16, 32, 64, 128), block_n=(16, 32, 64, 128), segment=(64, 128, 256, 512, 1024),
                  num_warps=(4, 8), num_stages=(1, 2, 3)),
        max_candidates=max_candidates,
        # 4 sequences with a max_model_len-wide table: the same kernel specializations as the timed b4 cases
        check=CheckSizes(targets=((3000, 1), (2200, 256)), neighbours=((5000, 1), (64, 64)), reference_rows=24,
                         padding_rows=3),
        smoke=False,
        gpu_constraints=True,
    )


def smoke_plan(max_candidates: int) -> Plan:
    return Plan(
        geometries=(Geometry("llama-like", 8, 2, 32, 16), Geometry("gemma-like", 4, 2, 32, 16, window=13)),
        dtype=torch.float32,
        cases=(Case("decode", 1, 20), Case("decode", 3, 40), Case("prefill", 1, 24)),
        deployment=Deployment(max_num_tokens=64, max_model_len=48),
        # shipped (m32 n32 s512), a block_m variant on its reduction grid, a two-segment variant
        axes=Axes(block_m=(8, 32), block_n=(16, 32), segment=(32, 512), num_warps=(4,), num_stages=(1, 2)),
        max_candidates=max_candidates,
        check=CheckSizes(targets=((37, 1), (30, 9)), neighbours=((45, 1), (6, 6)), reference_rows=6, padding_rows=2),
        smoke=True,
        gpu_constraints=False,
    )


# ----------------------------------------------------------------------------------------------------------
# candidates


def config_label(config: AttentionLaunchConfig) -> str:
    return f"m{config.block_m} n{config.block_n} s{config.segment} w{config.num_warps} st{config.num_stages}"


def parse_label(label: str) -> dict:
    """config_label's inverse: "m64 n128 s256 w4 st2" -> make_config's keyword arguments."""
    keys = {"m": "block_m", "n": "block_n", "s": "segment", "w": "num_warps", "st": "num_stages"}
    fields = {}
    for part in label.split():
        prefix = part.rstrip("0123456789")
        if prefix not in keys or prefix == part:
            raise ValueError(f"bad config label {label!r}: expected like 'm64 n128 s256 w4 st2'")
        fields[keys[prefix]] = int(part[len(prefix):])
    if len(fields) != len(keys):
        raise ValueError(f"bad config label {label!r}: needs m, n, s, w and st")
    return fields


def make_config(geometry: Geometry, block_m: int, block_n: int, segment: int, num_warps: int,
                num_stages: int) -> AttentionLaunchConfig | None:
    """The config with these tiles for this geometry, or None when the kernel cannot take it."""
    group = next_power_of_two(geometry.queries_per_kv)
    if block_m % group or segment % block_n:
        return None
    try:
        return AttentionLaunchConfig(block_q=block_m // group, block_m=block_m, block_n=block_n, segment=segment,
                                     num_warps=num_warps, num_stages=num_stages,
                                     queries_per_kv=geometry.queries_per_kv)
    except ValueError:
        return None


def infeasible_reason(config: AttentionLaunchConfig, geometry: Geometry, dtype: torch.dtype,
                      gpu_constraints: bool) -> str | None:
    """Why a launch would fail or spill hopelessly (rough estimates: saves compiles), else None."""
    if not gpu_constraints:
        return None
    if config.block_m < 16 or config.block_n < 16:
        return "tl.dot needs tiles of at least 16"
    elem = torch.finfo(dtype).bits // 8
    d = geometry.head_dim
    smem = elem * (config.block_m * d + max(1, config.num_stages) * 2 * config.block_n * d)
    if smem > SHARED_MEMORY_BYTES:
        return f"~{smem // 1024} KB shared memory"
    acc_regs = config.block_m * d // (32 * config.num_warps)
    if acc_regs > MAX_ACC_REGS_PER_THREAD:
        return f"{acc_regs} fp32 accumulator registers per thread"
    return None


def candidate_configs(geometry: Geometry, dtype: torch.dtype, shipped: AttentionLaunchConfig, axes: Axes,
                      limit: int, gpu_constraints: bool, extra: tuple[str, ...] = ()) -> list[AttentionLaunchConfig]:
    """Shipped first, then the `extra` labels this geometry can launch, then one-axis variations around three anchors (shipped, decode-leaning, prefill-leaning)
    taken round-robin, then the rest of the grid in a fixed shuffled order; feasible and distinct only."""
    group = next_power_of_two(geometry.queries_per_kv)
    small_m = min(m for m in axes.block_m if m >= group and (not gpu_constraints or m >= 16))
    big_m = max(m for m in axes.block_m if m * geometry.head_dim <= 128 * 128 or m == small_m)
    mid_segment = sorted(axes.segment)[len(axes.segment) // 2]
    decode_anchor = replace(shipped, block_m=small_m, block_q=small_m // group,
                            segment=mid_segment, block_n=min(shipped.block_n, mid_segment // 2))
    prefill_anchor = replace(shipped, block_m=big_m, block_q=big_m // group,
                             num_warps=max(axes.num_warps))
    names = ("segment", "block_m", "num_stages", "block_n", "num_warps")

    def variations(anchor: AttentionLaunchConfig):
        yield anchor
        for name in names:
            for value in getattr(axes, name):
                fields = {k: getattr(anchor, k) for k in ("block_m", "block_n", "segment", "num_warps", "num_stages")}
                fields[name] = value
                yield make_config(geometry, **fields)

    grid = [make_config(geometry, *values) for values in itertools.product(
        axes.block_m, axes.block_n, axes.segment, axes.num_warps, axes.num_stages)]
    random.Random(0).shuffle(grid)
    round_robin = itertools.chain.from_iterable(itertools.zip_longest(
        *(variations(a) for a in (shipped, decode_anchor, prefill_anchor))))
    chosen: list[AttentionLaunchConfig] = [shipped]
    requested = [make_config(geometry, **parse_label(label)) for label in extra]
    for config in itertools.chain(requested, round_robin, grid):
        if len(chosen) >= limit:
            break
        if config is None:
            continue
        config = replace(config, row_sums_by_dot=shipped.row_sums_by_dot)   # the label names tiles, not row sums
        if config in chosen:
            continue
        if infeasible_reason(config, geometry, dtype, gpu_constraints):
            continue
        chosen.append(config)
    return chosen


# ----------------------------------------------------------------------------------------------------------
# inputs and launches


def table_width(geometry: Geometry, deployment: Deployment) -> int:
    return -(-deployment.max_model_len // geometry.page_size)


def num_segments(geometry: Geometry, deployment: Deployment, config: AttentionLaunchConfig) -> int:
    """As paged_attention.num_kv_segments for a max_model_len-wide table and max_seqlen_k=max_model_len."""
    kv = min(table_width(geometry, deployment) * geometry.page_size, deployment.max_model_len)
    return max(1, -(-kv // config.segment))


def split_workspace_bytes(geometry: Geometry, deployment: Deployment, config: AttentionLaunchConfig,
                          num_tokens: int) -> int:
    from vosti_plugin.attention.paged_attention import split_workspace_numel

    segments = num_segments(geometry, deployment, config)
    return 4 * split_workspace_numel(num_tokens, geometry.q_heads, geometry.head_dim, segments)


def deployed_path(geometry: Geometry, deployment: Deployment, config: AttentionLaunchConfig) -> str:
    """The path the backend would pick for this deployment (CUDA workspace limit, graphs up to 512 tokens)."""
    from vosti_plugin.attention.sub_launch import deployment_path

    path, _ = deployment_path(max_num_tokens=deployment.max_num_tokens,
                              max_graph_tokens=min(512, deployment.max_num_tokens),
                              max_model_len=deployment.max_model_len, page_size=geometry.page_size,
                              segment=config.segment, num_q_heads=geometry.q_heads, head_dim=geometry.head_dim,
                              limit_bytes=deployment.split_limit_bytes)
    return path


@dataclass
class CaseInputs:
    q: torch.Tensor
    out: torch.Tensor
    caches: list[tuple[torch.Tensor, torch.Tensor]]  # one (k, v) per copy: successive "layers"
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor


def build_case_inputs(geometry: Geometry, case: Case, deployment: Deployment, dtype: torch.dtype, device: str,
                      copies: int, seed: int = 0) -> CaseInputs:
    """Random K/V in shuffled pages; a block table as wide as max_model_len (the rest points at page 0)."""
    page = geometry.page_size
    pages = -(-case.context // page)
    width = table_width(geometry, deployment)
    if pages > width:
        raise ValueError(f"{case.label}: context {case.context} exceeds max_model_len {deployment.max_model_len}")
    num_blocks = case.batch * pages
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (num_blocks, page, geometry.kv_heads, geometry.head_dim)
    caches = [(torch.randn(shape, dtype=dtype, device=device, generator=gen),
               torch.randn(shape, dtype=dtype, device=device, generator=gen)) for _ in range(copies)]
    perm = torch.randperm(num_blocks, device=device, generator=gen).to(torch.int32)
    block_table = torch.zeros(case.batch, width, dtype=torch.int32, device=device)
    block_table[:, :pages] = perm.view(case.batch, pages)
    q = torch.randn(case.num_tokens, geometry.q_heads, geometry.head_dim, dtype=dtype, device=device, generator=gen)
    return CaseInputs(
        q=q, out=torch.empty_like(q), caches=caches, block_table=block_table,
        seq_lens=torch.full((case.batch,), case.context, dtype=torch.int32, device=device),
        query_start_loc=torch.arange(case.batch + 1, dtype=torch.int32, device=device) * case.q_len,
    )


def kv_copies(geometry: Geometry, case: Case, dtype: torch.dtype, smoke: bool) -> int:
    if smoke or case.kind == "prefill":  # prefill is compute-bound: L2 residency does not matter
        return 1
    elem = torch.finfo(dtype).bits // 8
    per_copy = case.batch * -(-case.context // geometry.page_size) * geometry.page_size * \
        geometry.kv_heads * geometry.head_dim * 2 * elem
    return max(1, min(MAX_KV_COPIES, -(-L2_ROTATION_BYTES // per_copy)))


class Workspace:
    """One flat fp32 split workspace per process, grown on demand (the backend keeps one per device)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.buffer = torch.empty(0, dtype=torch.float32, device=device)

    def get(self, numel: int) -> torch.Tensor:
        if self.buffer.numel() < numel:
            self.buffer = None  # free before allocating the larger one
            self.buffer = torch.empty(numel, dtype=torch.float32, device=self.device)
        return self.buffer


def attention_calls(geometry: Geometry, case: Case, deployment: Deployment, config: AttentionLaunchConfig,
                    path: str, inputs: CaseInputs, workspace: Workspace) -> list:
    """One zero-argument callable per K/V copy, each a full paged_attention launch as the backend makes it."""
    from vosti_plugin.attention.paged_attention import paged_attention, split_workspace_numel

    ws = None
    if path == "split":
        ws = workspace.get(split_workspace_numel(case.num_tokens, geometry.q_heads, geometry.head_dim,
                                                 num_segments(geometry, deployment, config)))

    def call(k_cache, v_cache):
        return lambda: paged_attention(
            inputs.q, k_cache, v_cache, inputs.block_table, inputs.seq_lens, inputs.query_start_loc, inputs.out,
            scale=geometry.head_dim ** -0.5, config=config, sliding_window=geometry.window,
            max_seqlen_k=deployment.max_model_len, workspace=ws, path=path)

    return [call(k, v) for k, v in inputs.caches]


def split_skip_reason(geometry: Geometry, case: Case, deployment: Deployment,
                      config: AttentionLaunchConfig) -> str | None:
    needed = split_workspace_bytes(geometry, deployment, config, case.num_tokens)
    if needed > deployment.split_limit_bytes:
        return f"split workspace {needed / 2**30:.1f} GiB > {deployment.split_limit_bytes / 2**30:.0f} GiB limit"
    return None


# ----------------------------------------------------------------------------------------------------------
# timing


def time_per_call_ms(calls: list, device: str, target_s: float = 0.03) -> float:
    """Median time per call: on CUDA, all calls captured in one graph (no launch overhead, K/V rotating
    through the copies), replayed until about target_s; on CPU, one timed pass."""
    if device != "cuda":
        t0 = time.perf_counter()
        for call in calls:
            call()
        return (time.perf_counter() - t0) * 1e3 / len(calls)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()

    def replay_ms() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    first = replay_ms()
    reps = max(3, min(25, int(target_s * 1e3 / max(first, 1e-3))))
    times = [replay_ms() for _ in range(reps)]
    del graph
    return statistics.median(times) / len(calls)


def measure(plan: Plan, geometry: Geometry, case: Case, config: AttentionLaunchConfig, path: str,
            inputs: CaseInputs, workspace: Workspace, device: str) -> dict:
    record = {"geometry": geometry.name, "case": case.label, "config": config_label(config), "path": path}
    if path == "split":
        reason = split_skip_reason(geometry, case, plan.deployment, config)
        if reason:
            return {**record, "skipped": reason}
    calls = attention_calls(geometry, case, plan.deployment, config, path, inputs, workspace)
    ms = time_per_call_ms(calls, device)
    record.update(ms=round(ms, 5), copies=len(calls))
    elem = torch.finfo(plan.dtype).bits // 8
    if case.kind == "decode":
        rate = case.kv_bytes(geometry, elem) / (ms * 1e-3)
        record.update(kv_GBps=round(rate / 1e9, 1), pct_hbm=round(100 * rate / HBM_BYTES_PER_S, 1))
    else:
        record["TFLOPs"] = round(case.flops(geometry) / (ms * 1e-3) / 1e12, 2)
    return record


def sdpa_ms(plan: Plan, geometry: Geometry, case: Case, device: str) -> dict:
    """torch SDPA on dense [1, heads, T, d] K/V for the same prefill (causal; no window: more work for Gemma)."""
    import torch.nn.functional as F

    gen = torch.Generator(device=device).manual_seed(1)
    shape_q = (1, geometry.q_heads, case.context, geometry.head_dim)
    shape_kv = (1, geometry.kv_heads, case.context, geometry.head_dim)
    q = torch.randn(shape_q, dtype=plan.dtype, device=device, generator=gen)
    k = torch.randn(shape_kv, dtype=plan.dtype, device=device, generator=gen)
    v = torch.randn(shape_kv, dtype=plan.dtype, device=device, generator=gen)
    ms = time_per_call_ms([lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)], device)
    full_flops = 4.0 * sum(range(1, case.context + 1)) * geometry.q_heads * geometry.head_dim
    return {"ms": round(ms, 5), "TFLOPs_causal": round(full_flops / (ms * 1e-3) / 1e12, 2),
            "note": "dense causal, no window" if geometry.window else "dense causal"}


def copy_ceiling(device: str) -> dict:
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = time_per_call_ms([lambda: dst.copy_(src)], device)
    return {"ms": round(ms, 4), "GBps_read_plus_write": round(2 * src.numel() / (ms * 1e-3) / 1e9, 1)}


# ----------------------------------------------------------------------------------------------------------
# compiling ahead in worker processes (fills Triton's on-disk cache; the timing process then loads from it)


def compile_task(task: tuple) -> dict:
    """Launch one (geometry, config, path) once per distinct kernel specialization of the timed cases
    (num_seqs 1, 4, 16; every other launch argument is the same as when timing)."""
    geometry, config, path, dtype_name, deployment, batches, device = task
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # interpreter: -inf - -inf in masked lanes
    t0 = time.time()
    try:
        dtype = getattr(torch, dtype_name)
        workspace = Workspace(device)
        case_probe = Case("decode", 1, geometry.page_size)
        for batch in batches:
            case = replace(case_probe, batch=batch)
            if path == "split" and split_skip_reason(geometry, case, deployment, config):
                continue
            inputs = build_case_inputs(geometry, case, deployment, dtype, device, copies=1)
            for call in attention_calls(geometry, case, deployment, config, path, inputs, workspace):
                call()
        if device == "cuda":
            torch.cuda.synchronize()
        return {"s": round(time.time() - t0, 2)}
    except Exception as exc:  # noqa: BLE001
        return {"s": round(time.time() - t0, 2), "error": repr(exc)[:300]}


# ----------------------------------------------------------------------------------------------------------
# checks: batch invariance (bitwise), split == fused (bitwise), fp64 reference (tolerance)


class Checker:
    """Fixed requests per geometry; a config's rows alone vs in a mixed 4-sequence batch, split vs fused
    (bitwise), against the fp64 reference (tolerance), and its batch rows vs another config's (bitwise)."""

    def __init__(self, plan: Plan, geometry: Geometry, device: str) -> None:
        from vosti_plugin.attention import paged_batch as reference
        from vosti_plugin.integration.reference_attention import reference_attention

        self.ref = reference
        self.reference_attention = reference_attention
        self.plan, self.geometry, self.device = plan, geometry, device
        sizes = plan.check
        requests = [reference.random_request(kv, q, geometry.q_heads, geometry.kv_heads, geometry.head_dim,
                                             seed=100 + i, dtype=plan.dtype, device=device)
                    for i, (kv, q) in enumerate(sizes.targets + sizes.neighbours)]
        self.targets, neighbours = requests[: len(sizes.targets)], requests[len(sizes.targets):]
        self.batch = neighbours[:1] + self.targets + neighbours[1:]
        self.mixed: dict[str, dict[str, list[torch.Tensor]]] = {}  # config label -> path -> target rows

    def paths(self, config: AttentionLaunchConfig) -> list[str]:
        num_tokens = sum(r.q_len for r in self.batch) + self.plan.check.padding_rows
        fits = split_workspace_bytes(self.geometry, self.plan.deployment, config, num_tokens) <= \
            self.plan.deployment.split_limit_bytes
        return [p for p in PATHS if p == "fused" or fits]

    def run(self, config: AttentionLaunchConfig, requests, path: str, seed: int, padding_rows: int = 0):
        # a max_model_len-wide table and max_seqlen_k: the launch arguments of the timed cases
        geometry, width = self.geometry, table_width(self.geometry, self.plan.deployment)
        pages = max(-(-r.kv_len // geometry.page_size) for r in requests)
        batch = self.ref.build_paged_batch(requests, page_size=geometry.page_size, seed=seed,
                                           padding_rows=padding_rows, spare_table_columns=width - pages)
        return self.ref.run_paged_batch(batch, config, scale=geometry.head_dim ** -0.5,
                                        sliding_window=geometry.window,
                                        max_seqlen_k=self.plan.deployment.max_model_len, path=path)

    def mixed_rows(self, config: AttentionLaunchConfig) -> dict[str, list[torch.Tensor]]:
        label = config_label(config)
        if label not in self.mixed:
            self.mixed[label] = {}
            for path in self.paths(config):
                rows = self.run(config, self.batch, path, seed=7, padding_rows=self.plan.check.padding_rows)
                self.mixed[label][path] = rows[1 : 1 + len(self.targets)]
        return self.mixed[label]

    def check(self, config: AttentionLaunchConfig) -> dict:
        ref, plan, geometry, device = self.ref, self.plan, self.geometry, self.device
        mixed = self.mixed_rows(config)
        paths = list(mixed)
        pairs, mismatched = 0, []
        for index, target in enumerate(self.targets):
            alone = {p: self.run(config, [target], p, seed=3 + index)[0] for p in paths}
            for a_path, b_path in itertools.product(paths, paths):
                pairs += 1
                if not ref.bitwise_equal(alone[a_path], mixed[b_path][index]):
                    mismatched.append(f"target{index} alone/{a_path} vs batch/{b_path}")
        tol = 2e-5 if plan.dtype == torch.float32 else 2e-2
        worst, out_of_tol = 0.0, 0
        for index, target in enumerate(self.targets):
            got = mixed[paths[0]][index]
            rows = torch.arange(target.q_len)
            if target.q_len > plan.check.reference_rows:
                gen = torch.Generator().manual_seed(index)
                pick = torch.randperm(target.q_len, generator=gen)[: plan.check.reference_rows]
                rows = torch.cat([pick, torch.tensor([0, target.q_len - 1])]).unique()
            expected = self.reference_attention(target.queries[rows.to(device)], target.keys, target.values,
                                               target.positions()[rows], scale=geometry.head_dim ** -0.5,
                                               sliding_window=geometry.window)
            err = (got[rows.to(device)].double() - expected).abs()
            worst = max(worst, float(err.max()))
            out_of_tol += int((err > tol + tol * expected.abs()).sum())
        return {
            "config": config_label(config), "paths": paths, "bitwise_pairs": pairs,
            "bitwise_mismatches": mismatched, "reference_max_abs_err": worst,
            "tolerance": f"atol=rtol={tol} vs fp64", "out_of_tolerance": out_of_tol,
            "pass": not mismatched and out_of_tol == 0,
        }

    def same_bits(self, a: AttentionLaunchConfig, b: AttentionLaunchConfig) -> dict:
        """Informational: do two configs give the same bits for the same rows? Expected only when they share
        block_n and segment (the reduction grid); tells whether e.g. a larger block_m could serve prefill."""
        rows_a, rows_b = self.mixed_rows(a), self.mixed_rows(b)
        common = [p for p in rows_a if p in rows_b]
        equal = all(self.ref.bitwise_equal(x, y) for p in common for x, y in zip(rows_a[p], rows_b[p]))
        return {"a": config_label(a), "b": config_label(b), "paths": common, "bitwise_equal": equal,
                "same_reduction_grid": (a.block_n, a.segment) == (b.block_n, b.segment)}


# ----------------------------------------------------------------------------------------------------------
# summary


def _key_metric(record: dict) -> str:
    if "error" in record:
        return "error"
    if "skipped" in record:
        return "skipped"
    if "pct_hbm" in record:
        return f"{record['ms'] * 1e3:7.1f}us {record['kv_GBps']:6.0f}GB/s {record['pct_hbm']:5.1f}%"
    return f"{record['ms']:7.3f}ms {record['TFLOPs']:6.1f}TF/s"


def summarize(plan: Plan, data: dict, shipped: dict[str, AttentionLaunchConfig]) -> dict:
    """Best (config, path) per case and the best single (config, path) per geometry; fills data['summary']."""
    timed = [r for r in data["measurements"] if "ms" in r]
    summary: dict = {"best_per_case": [], "best_single_config": {}}
    for geometry in plan.geometries:
        ship = config_label(shipped[geometry.name])
        rows = [r for r in timed if r["geometry"] == geometry.name]
        baseline = {}
        for case in plan.cases:
            here = [r for r in rows if r["case"] == case.label]
            ship_rows = {r["path"]: r for r in data["measurements"]
                         if r["geometry"] == geometry.name and r["case"] == case.label and r["config"] == ship}
            if not here:
                continue
            best = min(here, key=lambda r: r["ms"])
            ship_times = [r["ms"] for r in ship_rows.values() if "ms" in r]
            if ship_times:
                baseline[case.label] = min(ship_times)
            summary["best_per_case"].append({
                "geometry": geometry.name, "case": case.label, "best": best,
                "shipped": ship_rows, "sdpa": data["sdpa"].get(f"{geometry.name}/{case.label}"),
                "speedup_vs_shipped": round(baseline[case.label] / best["ms"], 2) if case.label in baseline else None,
            })
        scores = []
        for (label, path), group in itertools.groupby(sorted(rows, key=lambda r: (r["config"], r["path"])),
                                                      key=lambda r: (r["config"], r["path"])):
            group = [r for r in group if r["case"] in baseline]
            if len(group) != len(baseline) or not group:
                continue
            ratio = math.exp(sum(math.log(r["ms"] / baseline[r["case"]]) for r in group) / len(group))
            scores.append({"config": label, "path": path, "geomean_time_vs_shipped": round(ratio, 3),
                           "deployed_path": data["deployed_path"][geometry.name].get(label)})
        scores.sort(key=lambda s: s["geomean_time_vs_shipped"])
        summary["best_single_config"][geometry.name] = scores[:5]
    data["summary"] = summary
    return summary


def print_summary(plan: Plan, data: dict, emit) -> None:
    summary = data.get("summary", {})
    dep = plan.deployment
    emit(f"\n=== attention sweep ({data['env'].get('gpu', data['env']['mode'])}, {data['env']['dtype']}; "
         f"deployment max_num_tokens={dep.max_num_tokens} max_model_len={dep.max_model_len}) ===")
    emit(f"{'geometry':13s} {'case':16s} | {'shipped split':30s} | {'shipped fused':30s} | "
         f"{'best config':22s} {'path':5s} {'time / rate':30s} {'x':>5s} | sdpa")
    for row in summary.get("best_per_case", []):
        best = row["best"]
        sdpa = row["sdpa"]
        ship = row["shipped"]
        sdpa_text = f"{sdpa['ms']:.3f}ms ({sdpa['note']})" if sdpa else ""
        split, fused = (_key_metric(ship[p]) if p in ship else "-" for p in PATHS)
        emit(f"{row['geometry']:13s} {row['case']:16s} | {split:30s} | {fused:30s} | {best['config']:22s} {best['path']:5s} "
             f"{_key_metric(best):30s} {row['speedup_vs_shipped'] or 0:5.2f} | "
             f"{sdpa_text}")
    for name, scores in summary.get("best_single_config", {}).items():
        shipped = data["shipped"][name]
        emit(f"{name}: shipped {shipped['config']} (deploys as {shipped['deployed_path']}); best single configs "
             "(geomean time over all cases / shipped's better path, lower is better):")
        for s in scores:
            emit(f"    {s['config']:22s} {s['path']:5s} {s['geomean_time_vs_shipped']:6.3f}  "
                 f"(this deployment would run it {s['deployed_path']})")
    for name, checks in data["checks"].items():
        for c in checks:
            state = "PASS" if c.get("pass") else "FAIL"
            detail = c.get("error") or (f"bitwise {c['bitwise_pairs'] - len(c['bitwise_mismatches'])}/"
                                        f"{c['bitwise_pairs']} equal ({'+'.join(c['paths'])}), fp64 ref max err "
                                        f"{c['reference_max_abs_err']:.2e} ({c['tolerance']}, "
                                        f"{c['out_of_tolerance']} out)")
            emit(f"  [{state}] check {name} {c['config']}: {detail}")
    for name, pairs in data.get("cross_config", {}).items():
        for c in pairs:
            verdict = c.get("error") or ("same bits" if c["bitwise_equal"] else "different bits")
            grid = "same block_n+segment" if c.get("same_reduction_grid") else "other block_n/segment"
            emit(f"  cross-config {name} {c['a']} vs {c['b']} ({grid}): {verdict}")
    if "copy_ceiling_1GiB" in data:
        emit(f"device copy 1 GiB: {data['copy_ceiling_1GiB']['GBps_read_plus_write']} GB/s read + write "
             f"(HBM percentages above are of {HBM_BYTES_PER_S / 1e12} TB/s)")
    if data["errors"]:
        emit(f"errors: {', '.join(list(data['errors'])[:8])}")
    emit(f"candidates timed: {data['progress']}; wall {data.get('wall_s')} s; JSON: {data['out']}")


# ----------------------------------------------------------------------------------------------------------
# driver


class Reporter:
    """Progress bars (rich when importable) and a JSON file rewritten after every unit of work."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=Console(highlight=False))
            console = self.progress.console
            self.emit = lambda msg: console.print(msg, markup=False, highlight=False, soft_wrap=True)
        except ImportError:  # pragma: no cover - the fallback for a machine without rich
            self.progress = None
            self.emit = lambda msg: print(msg, flush=True)

    def task(self, description: str, total: int):
        return self.progress.add_task(description, total=total) if self.progress else None

    def advance(self, task, **kwargs) -> None:
        if self.progress and task is not None:
            self.progress.update(task, advance=1, **kwargs)

    def write(self, data: dict) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, self.path)


def _environment(plan: Plan, device: str) -> dict:
    import triton

    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "mode": "cpu-smoke (Triton interpreter, fp32)" if plan.smoke else "cuda", "dtype": str(plan.dtype)}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    return env


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="attention_sweep.json")
    parser.add_argument("--budget-s", type=float, default=230.0, help="stop timing and checking after this many s")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny fp32 run through the Triton interpreter")
    parser.add_argument("--max-candidates", type=int, default=None, help="per geometry (default 40; smoke 3)")
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="processes compiling ahead (default: CPU cores - 2; 0 compiles in-process)")
    parser.add_argument("--geometries", default=None, help="comma-separated subset of geometry names")
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--max-num-tokens", type=int, default=8192, help="deployment size for choose_path")
    parser.add_argument("--extra", default="",
                        help="comma-separated configs timed right after the shipped one, e.g. 'm64 n128 s256 w4 st2'")
    parser.add_argument("--check-top", type=int, default=None,
                        help="configs checked per geometry besides shipped (default 3; smoke: all)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # interpreter: -inf - -inf in masked lanes
    deadline = started + args.budget_s
    if args.cpu_smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    plan = smoke_plan(args.max_candidates or 3) if args.cpu_smoke else \
        gpu_plan(args.page_size, args.max_num_tokens, args.max_candidates or 40)
    if args.geometries:
        wanted = set(args.geometries.split(","))
        plan = replace(plan, geometries=tuple(g for g in plan.geometries if g.name in wanted))
    reporter = Reporter(args.out)
    emit = reporter.emit
    data: dict = {"out": args.out, "args": vars(args), "env": {}, "plan": {}, "shipped": {}, "deployed_path": {},
                  "candidates": {}, "compile": {}, "measurements": [], "sdpa": {}, "checks": {}, "cross_config": {},
                  "errors": {},
                  "progress": "0"}
    if not plan.smoke and not torch.cuda.is_available():
        emit("FAIL: no CUDA device (use --cpu-smoke for a logic check)")
        data["errors"]["setup"] = "no CUDA device"
        reporter.write(data)
        return 2
    device = "cpu" if plan.smoke else "cuda"
    data["env"] = _environment(plan, device)
    data["plan"] = {"geometries": [asdict(g) for g in plan.geometries], "cases": [c.label for c in plan.cases],
                    "deployment": asdict(plan.deployment), "axes": asdict(plan.axes),
                    "timing": "CUDA graph of all K/V copies, median replay / copies" if device == "cuda"
                    else "one perf_counter pass (interpreter: logic only, not a speed)"}

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    shipped: dict[str, AttentionLaunchConfig] = {}
    order: list[tuple[Geometry, AttentionLaunchConfig]] = []
    per_geometry = []
    for geometry in plan.geometries:
        ship = select_config(geometry.head_dim, geometry.q_heads, geometry.kv_heads, geometry.page_size, plan.dtype)
        shipped[geometry.name] = ship
        configs = candidate_configs(geometry, plan.dtype, ship, plan.axes, plan.max_candidates, plan.gpu_constraints,
                                    extra=tuple(x.strip() for x in args.extra.split(",") if x.strip()))
        data["candidates"][geometry.name] = [config_label(c) for c in configs]
        data["deployed_path"][geometry.name] = {config_label(c): deployed_path(geometry, plan.deployment, c)
                                                for c in configs}
        data["shipped"][geometry.name] = {"config": config_label(ship), **asdict(ship),
                                          "deployed_path": deployed_path(geometry, plan.deployment, ship)}
        per_geometry.append([(geometry, c) for c in configs])
    for group in itertools.zip_longest(*per_geometry):  # interleave geometries: a cut-off run covers both
        order.extend(item for item in group if item is not None)
    reporter.write(data)

    pool = None
    workers = args.compile_workers if args.compile_workers is not None else \
        0 if plan.smoke else max(1, min(MAX_COMPILE_WORKERS, len(os.sched_getaffinity(0)) - 2))
    compiled = None
    if workers > 0:
        import multiprocessing

        tasks = [(g, c, p, str(plan.dtype).removeprefix("torch."), plan.deployment,
                  sorted({case.batch for case in plan.cases}), device) for g, c in order for p in PATHS]
        pool = multiprocessing.get_context("spawn").Pool(workers)
        compiled = pool.imap(compile_task, tasks)
        emit(f"compiling {len(tasks)} (config, path) variants in {workers} worker processes, ahead of timing")

    exit_code = 0
    if reporter.progress:
        reporter.progress.start()
    try:
        exit_code = _run(plan, data, reporter, order, shipped, compiled, device, deadline, args)
    except KeyboardInterrupt:
        data["errors"]["interrupted"] = "SIGTERM or Ctrl-C: partial results"
        exit_code = 1
    finally:
        if pool is not None:
            pool.terminate()
        if reporter.progress:
            reporter.progress.stop()
        data["wall_s"] = round(time.time() - started, 1)
        try:
            summarize(plan, data, shipped)
        except Exception as exc:  # noqa: BLE001
            data["errors"]["summary"] = "".join(traceback.format_exception(exc))[-2000:]
        reporter.write(data)
        print_summary(plan, data, lambda msg: print(msg, flush=True))
    return exit_code


def _run(plan: Plan, data: dict, reporter: Reporter, order, shipped, compiled, device: str, deadline: float,
         args) -> int:
    emit = reporter.emit
    check_reserve = 0.0 if plan.smoke else min(40.0, 0.15 * args.budget_s)
    if device == "cuda":
        try:
            data["copy_ceiling_1GiB"] = copy_ceiling(device)
            emit(f"device copy 1 GiB: {data['copy_ceiling_1GiB']['GBps_read_plus_write']} GB/s (read + write)")
        except Exception as exc:  # noqa: BLE001
            data["errors"]["copy"] = repr(exc)
    for geometry in plan.geometries:
        for case in plan.cases:
            if case.kind == "prefill":
                try:
                    data["sdpa"][f"{geometry.name}/{case.label}"] = sdpa_ms(plan, geometry, case, device)
                except Exception as exc:  # noqa: BLE001
                    data["errors"][f"sdpa/{geometry.name}/{case.label}"] = repr(exc)[:500]

    inputs_cache: dict[tuple[str, str], CaseInputs] = {}
    workspace = Workspace(device)
    task = reporter.task("timing candidates", len(order))
    done = 0
    headline = headline_cases(plan)
    for geometry, config in order:
        remaining = deadline - check_reserve - time.time()
        if remaining <= 0:
            emit(f"time budget reached: {done}/{len(order)} candidates timed")
            break
        label = config_label(config)
        compile_errors = {}
        if compiled is not None:
            try:
                for path in PATHS:
                    wait = min(remaining, COMPILE_WAIT_S)
                    result = data["compile"][f"{geometry.name}/{label}/{path}"] = compiled.next(timeout=wait)
                    if "error" in result:  # the same launch would fail here: do not compile it again
                        compile_errors[path] = "compile worker: " + result["error"]
            except Exception as exc:  # noqa: BLE001 - multiprocessing.TimeoutError or a dead pool
                emit(f"stopped waiting for compile workers ({exc!r}); compiling in this process from here")
                compiled = None
        t0 = time.time()
        results = []
        for path in PATHS:
            for case in plan.cases:
                key = (geometry.name, case.label)
                if path in compile_errors:
                    results.append({"geometry": geometry.name, "case": case.label, "config": label, "path": path,
                                    "error": compile_errors[path]})
                    continue
                try:
                    if key not in inputs_cache:
                        inputs_cache[key] = build_case_inputs(geometry, case, plan.deployment, plan.dtype, device,
                                                              kv_copies(geometry, case, plan.dtype, plan.smoke))
                    record = measure(plan, geometry, case, config, path, inputs_cache[key], workspace, device)
                except Exception as exc:  # noqa: BLE001
                    record = {"geometry": geometry.name, "case": case.label, "config": label, "path": path,
                              "error": repr(exc)[:500]}
                    if device == "cuda":
                        try:
                            torch.cuda.synchronize()
                        except Exception:  # noqa: BLE001 - a sticky CUDA error: later records say so too
                            pass
                results.append(record)
        data["measurements"].extend(results)
        done += 1
        data["progress"] = f"{done}/{len(order)}"
        brief = "  ".join(f"{r['case'].replace('decode ', '').replace('prefill', 'pf')}/{r['path'][0]} "
                          f"{_rate(r)}" for r in results if "ms" in r and r["case"] in headline)
        failed = sum(1 for r in results if "error" in r)
        errors = f"  {failed} errors" if failed else ""
        emit(f"{geometry.name[:6]} {label:22s} {time.time() - t0:5.1f}s {brief}{errors}")
        reporter.advance(task)
        reporter.write(data)

    summary = summarize(plan, data, shipped)
    exit_code = 0
    check_top = args.check_top if args.check_top is not None else plan.max_candidates if plan.smoke else 3
    for geometry in plan.geometries:
        picks = [shipped[geometry.name]]
        labels = [s["config"] for s in summary["best_single_config"].get(geometry.name, [])[:1]]
        rows = [row for row in summary["best_per_case"] if row["geometry"] == geometry.name]
        rows.sort(key=lambda row: row["case"] not in headline)  # headline cases first, stable otherwise
        labels += [row["best"]["config"] for row in rows]
        if plan.smoke:  # the logic check covers every candidate
            labels += [config_label(c) for g, c in order if g is geometry]
        by_label = {config_label(c): c for g, c in order if g is geometry}
        for lab in labels:
            if by_label[lab] not in picks and len(picks) < 1 + check_top:
                picks.append(by_label[lab])
        checks = data["checks"].setdefault(geometry.name, [])
        checker = Checker(plan, geometry, device)
        for config in picks:
            if time.time() > deadline:
                checks.append({"config": config_label(config), "pass": False, "error": "skipped: time budget"})
                continue
            try:
                result = checker.check(config)
            except Exception as exc:  # noqa: BLE001
                result = {"config": config_label(config), "pass": False,
                          "error": "".join(traceback.format_exception(exc))[-1500:]}
            checks.append(result)
            if not result["pass"] and not str(result.get("error", "")).startswith("skipped"):
                exit_code = 1
            emit(f"check {geometry.name} {config_label(config)}: {'PASS' if result['pass'] else 'FAIL'}")
            reporter.write(data)
        # Informational: configs that differ from shipped only in block_m / num_warps / num_stages (same
        # reduction grid), and the checked ones, against shipped: same bits?
        ship = shipped[geometry.name]
        timed = {m["config"] for m in data["measurements"] if m["geometry"] == geometry.name and "ms" in m}
        partners = [c for g, c in order if g is geometry and c != ship and config_label(c) in timed and
                    (c.block_n, c.segment) == (ship.block_n, ship.segment)] + picks[1:]
        cross = data["cross_config"].setdefault(geometry.name, [])
        for config in dict.fromkeys(partners):
            if time.time() > deadline:
                break
            try:
                cross.append(checker.same_bits(ship, config))
            except Exception as exc:  # noqa: BLE001
                cross.append({"a": config_label(ship), "b": config_label(config), "error": repr(exc)[:300]})
            reporter.write(data)
    return exit_code


def headline_cases(plan: Plan) -> set[str]:
    """The cases shown in the one-line progress report of each candidate."""
    decode = [c for c in plan.cases if c.kind == "decode"]
    prefill = [c for c in plan.cases if c.kind == "prefill"]
    batches = sorted({c.batch for c in decode})
    mid = batches[len(batches) // 2] if batches else 0
    picks = [c for c in decode if c.batch == mid and c.context in (min(x.context for x in decode),
                                                                    max(x.context for x in decode))]
    picks += [max(decode, key=lambda c: (c.batch, c.context))] if decode else []
    picks += [max(prefill, key=lambda c: c.context)] if prefill else []
    return {c.label for c in picks}


def _rate(record: dict) -> str:
    return f"{record['pct_hbm']:.0f}%" if "pct_hbm" in record else f"{record['TFLOPs']:.0f}TF"


if __name__ == "__main__":
    sys.exit(main())
