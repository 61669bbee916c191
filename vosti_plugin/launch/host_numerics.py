"""Startup self-test of the trusted base (`host-numerics`): do this host's compiled or interpreted kernels
give a row the same bits wherever it sits in a batch?

The kernel proofs treat floating point as functions of their inputs: equal inputs give equal outputs,
wherever a row sits. That is an assumption about the machine (GPU, driver, Triton build; on a CPU,
Triton's interpreter and the numpy under it), not something the verifier can prove. This module launches
the configs the deployment will launch, with the deployment's dtype and device, and compares one row
alone against the same row at other lanes and tiles of a batch, bitwise:

- every linear layer's GEMM config (its real K, a narrowed N of the same divisibility); when the tall path
  is on, its prefill launch (TMA or pointer tiles), and unless VOSTI_MID_GEMM=0 its 64-row tiles, against the
  same row decoded alone: the verifier's cross-tile proofs trust a dot row not to change with the tile shape,
  and this is where that is tested;
- RMSNorm (plain and fused residual add), the gated activation, log-softmax over the vocabulary;
- paged attention with the deployment's attention config: a request alone vs between neighbours on
  other pages, its last prefill row vs the same position decoded, on the split and fused paths.

Results are cached per process and deployment key, so an engine that runs the check in several places
pays once.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import torch

from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.ops.gemm_rows import TALL_TILE_ROWS

__all__ = ["OBLIGATION", "HostNumericsResult", "ProbeResult", "check_in_worker", "describe_failure", "failure_of",
           "run_self_test"]

OBLIGATION = "host-numerics"
FIX = {
    "cpu": ("this CPU's interpreter numerics are not lane-invariant although vosti replaced the interpreter's "
            "dot, sums and math (vosti_plugin.interpreter_numerics); nothing in the launch can fix it: run "
            "`python -m vosti_plugin.integration.host_numerics_check` and report its output with `lscpu` and "
            "`pip list`"),
    "cuda": ("this GPU / driver / Triton build does not give a row the same bits at every batch position for "
             "the configs above; use the Triton version vLLM pins (vLLM 0.26.0: Triton 3.6) and a current "
             "driver, then re-run `python -m vosti_plugin.integration.host_numerics_check --model MODEL` on that "
             "GPU"),
}


@dataclass(frozen=True)
class ProbeResult:
    name: str
    differing: tuple[str, ...] = ()      # "lane 33 of 67 rows", ... ; empty when bitwise equal everywhere

    @property
    def ok(self) -> bool:
        return not self.differing


@dataclass(frozen=True)
class HostNumericsResult:
    device: str
    dtype: str
    seconds: float
    probes: tuple[ProbeResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.probes)

    def to_dict(self) -> dict:
        return {"passed": self.ok, "device": self.device, "dtype": self.dtype,
                "seconds": round(self.seconds, 4), "probes": len(self.probes),
                "failed": {p.name: list(p.differing) for p in self.probes if not p.ok}}


_cache: dict[str, HostNumericsResult] = {}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int, dtype, device, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype=dtype, device=device)


def _lanes(rows: int) -> list[int]:
    """Two lanes in three hold the row under test, every third a different row: each tile position is
    tried, next to equal and to different neighbours."""
    return [x for x in range(rows) if x % 3 != 2]


def _rows_probe(name: str, op: Callable[[torch.Tensor], torch.Tensor], width: int, tile: int,
                dtype, device, seed: int, alone_op: Callable[[torch.Tensor], torch.Tensor] | None = None
                ) -> ProbeResult:
    """op maps [M, width] -> [M, ...] row by row; the same row placed at the lanes of a batch of one tile
    and a few rows must give the bits it gives alone (through `alone_op` when the deployment computes a lone
    row another way, e.g. a decode GEMM against the tall path's launch)."""
    rows = tile + 3
    row = _randn(1, width, seed=seed, dtype=dtype, device=device)
    batch = _randn(rows, width, seed=seed + 1, dtype=dtype, device=device)
    lanes = _lanes(rows)
    batch[lanes] = row
    alone = (alone_op or op)(row)
    together = op(batch)
    bad = [x for x in lanes if not _same(together[x:x + 1], alone)]
    if bad:
        return ProbeResult(name, (f"{len(bad)} of {len(lanes)} placements in a {rows}-row batch differ "
                                  f"(lanes {', '.join(map(str, bad[:8]))}{', ...' if len(bad) > 8 else ''})",))
    return ProbeResult(name)


# rows of a tall probe: more than one 256-row tile of the tall kernels
_TALL_PROBE_ROWS = 384
_TALL_PROBE = "/tall vs decode"
TALL_FIX = ("set VOSTI_TALL_GEMM=0: prefill GEMMs then run the decode tiles, whose rows are lane-invariant here "
            "(slower prefill, the same guarantee); and report this GPU, driver and Triton version")
_TALL_COLS_PROBE = "/tall column walk vs decode"
TALL_COLS_FIX = ("set VOSTI_TMA_COLS_GEMM=0: whole 2048-row chunks of prefill GEMMs then run one program a tile, "
                 "whose rows the probe checks too (slower prefill, the same guarantee); and report this GPU, driver "
                 "and Triton version")
_MID_PROBE = "/mid vs decode"
MID_FIX = ("set VOSTI_MID_GEMM=0: GEMMs of 64 to 255 rows then run the decode tiles, whose rows are lane-invariant "
           "here (slower batched decode, the same guarantee); and report this GPU, driver and Triton version")
_DECODE_TILES_PROBE = "paged_attention/decode-tiles"
DECODE_TILES_FIX = ("set VOSTI_DECODE_TILE_ROWS=0: decode steps then run the prefill tiles (slower decode attention, "
                    "the same guarantee); and report this GPU, driver and Triton version")
_FUSED_PREFILL_PROBE = "paged_attention/fused-prefill"
FUSED_PREFILL_FIX = ("set VOSTI_PREFILL_FUSED_FROM=0: every step then runs the split path in one tile height (slower "
                     "prefill attention, the same guarantee); and report this GPU, driver and Triton version")
# refusals whose fix turns one switch off: (probe, fix)
_SWITCH_FIXES = ((_DECODE_TILES_PROBE, DECODE_TILES_FIX), (_FUSED_PREFILL_PROBE, FUSED_PREFILL_FIX))


def _narrow_n(n: int, block_n: int) -> int:
    """At most four column tiles; N's residue mod 16 (what Triton specializes on) is kept."""
    return n if n <= 4 * block_n + 16 else 4 * block_n + n % 16


def _matmul_probes(f: LaunchFacts, dtype, device) -> list[ProbeResult]:
    from vosti_plugin.launch.verified import linear_shapes
    from vosti_plugin.ops import matmul

    probes = []
    seen = set()
    for i, (layer, (n, k)) in enumerate(sorted(linear_shapes(f).items())):
        if not n or not k:
            continue
        config = matmul.select_config(n, k, dtype)
        n_test = _narrow_n(n, config.block_n)
        # vLLM's weight is [N, K]; vosti's linear launches on its transpose, so the probe does too (Triton
        # specializes on unit strides).
        b = _randn(n_test, k, seed=100 + i, dtype=dtype, device=device, scale=k ** -0.5).t()
        key = (k, n_test % 16, config)
        if key in seen:
            continue
        seen.add(key)

        def op(a, launch=matmul.launch_matmul, b=b, config=config):
            out = torch.empty(a.shape[0], b.shape[1], dtype=dtype, device=device)
            return launch(a, b, None, out, config)

        probes.append(_rows_probe(f"matmul/{layer} (K={k})", op, k, config.block_m, dtype, device, seed=200 + i))
        mid = matmul.mid_config(config)
        if matmul.mid_path_on(matmul.MID_MIN_ROWS) and mid != config:
            # a row of a 64-row tile against the same row decoded alone (the verifier trusts the tile height not
            # to change a dot's row, as for the tall path)
            probes.append(_rows_probe(f"matmul/{layer}{_MID_PROBE} (K={k})", partial(op, config=mid), k,
                                      max(matmul.MID_MIN_ROWS, mid.block_m), dtype, device, seed=200 + i,
                                      alone_op=op))
        if matmul.tall_path_on(matmul.TALL_MIN_ROWS, dtype):
            # a row of a prefill (the tall path's tiles, or its TMA kernel) against the same row decoded alone:
            # the verifier trusts tile shape and warps to leave a dot's row as it is; this checks it here
            tall = partial(op, launch=matmul.launch_tall)
            probes.append(_rows_probe(f"matmul/{layer}{_TALL_PROBE} (K={k})", tall, k, _TALL_PROBE_ROWS, dtype,
                                      device, seed=200 + i, alone_op=op))
            cols = matmul.tma_cols_path(n, matmul.tma_config(config, dtype), dtype) \
                if device == "cuda" and matmul.tma_path_on() else None
            if cols is not None:
                # a whole chunk of the column-walking TMA kernel and three rows past it, over one column tile a
                # program (N narrowed to TALL_COL_PROGRAMS of its tiles, its residue kept)
                n_cols = (matmul.TALL_COL_PROGRAMS - 1) * cols.block_n + (n % cols.block_n or cols.block_n)
                b_cols = _randn(n_cols, k, seed=150 + i, dtype=dtype, device=device, scale=k ** -0.5).t()
                probes.append(_rows_probe(f"matmul/{layer}{_TALL_COLS_PROBE} (K={k})",
                                          partial(op, launch=matmul.launch_tall, b=b_cols), k,
                                          matmul.TALL_COL_ROW_TILES * TALL_TILE_ROWS, dtype, device,
                                          seed=200 + i, alone_op=partial(op, b=b_cols)))
    return probes


def _dense_probes(f: LaunchFacts, dtype, device) -> list[ProbeResult]:
    from vosti_plugin.ops import activation, rmsnorm, softmax

    h = f.hidden_size
    weight = _randn(h, seed=300, dtype=dtype, device=device)
    residual = _randn(1, h, seed=301, dtype=dtype, device=device)
    norm_tile = 16

    def fused(x):
        res = residual.expand(x.shape[0], h).clone()
        out = rmsnorm.fused_add_rms_norm(x.clone(), res, weight, 1e-6)
        return torch.cat([t.reshape(x.shape[0], -1) for t in (out if isinstance(out, tuple) else (out,))], dim=1)

    is_gemma = "gemma" in f.architecture.lower()
    act = activation.gelu_tanh_and_mul if is_gemma else activation.silu_and_mul
    inter = f.intermediate_size or h
    vocab = min(f.vocab_size, 8192 + f.vocab_size % 16)
    return [
        _rows_probe("rms_norm", lambda x: rmsnorm.rms_norm(x, weight, 1e-6, gemma=is_gemma), h, norm_tile,
                    dtype, device, seed=310),
        _rows_probe("fused_add_rms_norm", fused, h, norm_tile, dtype, device, seed=320),
        _rows_probe("act_and_mul", act, 2 * inter, norm_tile, dtype, device, seed=330),
        _rows_probe("log_softmax", lambda x: softmax.log_softmax(x, dtype=torch.float32), vocab, norm_tile,
                    torch.float32, device, seed=340),
    ]


def _attention_probes(f: LaunchFacts, dtype, device) -> list[ProbeResult]:
    from vosti_plugin.attention.config import (fold_config, fused_prefill_from, launched_decode_config,
                                               prefill_config, select_config)
    from vosti_plugin.attention.paged_batch import build_paged_batch, random_request, run_paged_batch

    config = select_config(f.head_size, f.num_q_heads, f.num_kv_heads, f.page_size, dtype)
    heads = (f.num_q_heads, f.num_kv_heads)
    kv_len = config.segment + config.block_n + 3     # two segments, the second one partial
    q_len = 3

    def request(kv, q, seed):
        return random_request(kv, q, heads[0], heads[1], f.head_size, seed=seed, dtype=dtype, device=device)

    target = request(kv_len, q_len, 400)
    decoded = dataclasses.replace(target, queries=target.queries[-1:])
    neighbours = [request(config.block_q + 9, config.block_q + 1, 401), request(5, 1, 402)]
    kwargs = dict(scale=f.head_size ** -0.5, sliding_window=None)
    probes = []
    for path in ("split", "fused"):
        alone = run_paged_batch(build_paged_batch([target], page_size=f.page_size, seed=1, fused_kv=True), config,
                                path=path, **kwargs)[0]
        mixed = run_paged_batch(build_paged_batch([neighbours[0], target, neighbours[1], decoded],
                                                  page_size=f.page_size, seed=2, padding_rows=2, fused_kv=True),
                                config, path=path, **kwargs)
        bad = []
        if not _same(alone, mixed[1]):
            bad.append("request alone vs between neighbours on other pages")
        if not _same(alone[-1:], mixed[3]):
            bad.append("last prefill row vs the same position decoded")
        probes.append(ProbeResult(f"paged_attention/{path}", tuple(bad)))
    decode = launched_decode_config(config)
    if decode != config:   # decode-only steps run their own tiles: each decoded row against its prefill row
        # a reduction order that differs changes few rows' bits (H200: 2 of 45 decode batches), so the GPU decodes
        # hundreds of positions; the interpreter pays per program and its sums are order-fixed
        rows = min((16 if device == "cuda" else 2) * config.block_q + 3, kv_len)
        prefill = dataclasses.replace(target, queries=request(kv_len, rows, 403).queries)
        prefilled = run_paged_batch(build_paged_batch([prefill], page_size=f.page_size, seed=6, fused_kv=True),
                                    config, path="split", **kwargs)[0]
        decoded_rows = run_paged_batch(build_paged_batch([prefill.chunk(i, i + 1) for i in range(rows)],
                                                         page_size=f.page_size, seed=7, fused_kv=True),
                                       decode, path="split", **kwargs)
        probes.append(ProbeResult(_DECODE_TILES_PROBE, () if _same(prefilled, torch.cat(decoded_rows)) else
                                  (f"prefill rows in {config.block_m}-row tiles vs the same positions decoded in "
                                   f"{decode.block_m}-row tiles",)))
    if fused_prefill_from(dtype, config.queries_per_kv):
        # prefill steps run fused in taller tiles, the others split with a FOLD combine: the rows of a prefill that
        # spans two segments, both ways
        rows = min((8 if device == "cuda" else 1) * config.block_q + 5, kv_len)
        prefill = request(kv_len, rows, 404)
        batch = build_paged_batch([prefill], page_size=f.page_size, seed=8, fused_kv=True)
        fused = run_paged_batch(batch, prefill_config(config, f.head_size, f.page_size), path="fused", **kwargs)[0]
        split = run_paged_batch(batch, config, path="split", fold=fold_config(config, f.head_size), **kwargs)[0]
        probes.append(ProbeResult(_FUSED_PREFILL_PROBE, () if _same(fused, split) else
                                  (f"prefill rows fused in {prefill_config(config, f.head_size, f.page_size).block_m}-row tiles vs "
                                   f"split in {config.block_m}-row tiles and folded",)))
    if f.sliding_window:
        window = min(f.sliding_window, config.block_n + 1)
        alone = run_paged_batch(build_paged_batch([target], page_size=f.page_size, seed=4), config,
                                **{**kwargs, "sliding_window": window})[0]
        mixed = run_paged_batch(build_paged_batch([neighbours[0], target], page_size=f.page_size, seed=5),
                                config, **{**kwargs, "sliding_window": window})[1]
        probes.append(ProbeResult("paged_attention/window", () if _same(alone, mixed) else
                                  ("request alone vs after a neighbour, sliding window",)))
    return probes


def _key(f: LaunchFacts, device: str) -> str:
    from vosti_plugin.launch.verified import kernel_configs_for

    return repr((device, f.dtype, f.hidden_size, f.intermediate_size, f.vocab_size, f.architecture,
                 f.sliding_window is not None, sorted((k, sorted(v.items())) for k, v in kernel_configs_for(f).items())))


def _device(f: LaunchFacts) -> str:
    return "cuda" if f.platform == "cuda" else "cpu"


def run_self_test(f: LaunchFacts) -> HostNumericsResult:
    """Run (once per process and deployment) and return the result; never raises for a difference."""
    device = _device(f)
    key = _key(f, device)
    if key in _cache:
        return _cache[key]
    dtype = getattr(torch, f.dtype)
    t0 = time.perf_counter()
    # vLLM builds the model (and so calls this) under a default device and dtype; the probes name both.
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch.inference_mode(), torch.device("cpu"):
            probes = (_matmul_probes(f, dtype, device) + _dense_probes(f, dtype, device)
                      + _attention_probes(f, dtype, device))
            if device == "cuda":
                torch.cuda.synchronize()
    finally:
        torch.set_default_dtype(default_dtype)
    result = HostNumericsResult(device, f.dtype, time.perf_counter() - t0, tuple(probes))
    _cache[key] = result
    return result


def describe_failure(result: HostNumericsResult) -> str:
    parts = [f"{p.name}: {', '.join(p.differing)}" for p in result.probes if not p.ok]
    return (f"this host's kernels give a row different bits at different batch positions "
            f"({result.device}, {result.dtype}): " + "; ".join(parts))


def failure_of(result: HostNumericsResult):
    from vosti_plugin.launch.obligations import Failure

    failed = [p for p in result.probes if not p.ok]
    for probe, fix in ((_TALL_PROBE, TALL_FIX), (_TALL_COLS_PROBE, TALL_COLS_FIX), (_MID_PROBE, MID_FIX)):
        if failed and all(probe in p.name for p in failed):
            return Failure(OBLIGATION, describe_failure(result), fix)
    for probe, fix in _SWITCH_FIXES:
        if failed and all(p.name == probe for p in failed):
            return Failure(OBLIGATION, describe_failure(result), fix)
    return Failure(OBLIGATION, describe_failure(result), FIX.get(result.device, FIX["cuda"]))


def clear_cache() -> None:
    _cache.clear()


def _certificate_path(vllm_config) -> str | None:
    import os

    extra = getattr(vllm_config, "additional_config", None) or {}
    vosti = extra.get("vosti") if isinstance(extra, dict) else None
    from_config = vosti.get("certificate") if isinstance(vosti, dict) else None
    return os.environ.get("VOSTI_CERTIFICATE") or from_config


def record_in_certificate(vllm_config, result: HostNumericsResult) -> None:
    """Add the self-test's result to the certificate the config-building process wrote (if any)."""
    import json
    from pathlib import Path

    path = _certificate_path(vllm_config)
    if not path or not Path(path).is_file():
        return
    cert = json.loads(Path(path).read_text())
    cert[OBLIGATION] = result.to_dict()
    Path(path).write_text(json.dumps(cert, indent=2, sort_keys=True))


def check_in_worker(vllm_config) -> HostNumericsResult:
    """The `host-numerics` obligation, run where the model's kernels run (each worker, once per process
    and deployment): refuse the launch (LaunchRefused) if a row's bits depend on its batch position."""
    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.launch.log import vosti_logger
    from vosti_plugin.launch.obligations import LaunchRefused

    f = facts_from_vllm_config(vllm_config)
    fresh = _key(f, _device(f)) not in _cache
    result = run_self_test(f)
    if not result.ok:
        raise LaunchRefused([failure_of(result)])
    if fresh:
        vosti_logger().info("vosti %s self-test passed: %d probes, %.3f s on %s (%s)", OBLIGATION,
                                        len(result.probes), result.seconds, result.device, result.dtype)
        record_in_certificate(vllm_config, result)
    return result
