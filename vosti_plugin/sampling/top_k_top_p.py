"""Batch-invariant top-k / top-p masking as one Triton kernel: one program per row, nothing batch-wide,
no sort and no host sync.

Both thresholds are found by a bisection over the ordered fp32 key space (32 fixed iterations, each a
pass over the row in column chunks of BLOCK, a function of the vocabulary size only):
* ordered key of an fp32 value v: +bits(|v|) for v >= 0, -bits(|v|) for v < 0 (so -0.0 and +0.0 are one
  key); keys run over [-KEY_INF, KEY_INF] (+-inf) and map back to values with exact fp64 arithmetic
  (`_key_value`: powers of two built from the exponent's bits, no bitcast), so the search needs no
  integer view of the data;
* top-k: the largest key K with #{x >= value(K)} >= k; value(K) is the row's k-th largest value, and
  every token below it is masked (tokens tied with it are kept);
* top-p (on the top-k-masked row z): probabilities are vosti's softmax of z (the same chunked max and
  sum as vosti_plugin.ops.softmax, same BLOCK), each truncated to 2**-52 fixed point; the fixed-point
  sums are integers < 2**53, so fp64 adds them exactly in any order.  below(t) = sum of the fixed
  probabilities of tokens z < t; the largest key K with below(value(K)) <= floor((1 - p) * 2**52) gives
  the cut c = max{z <= value(K)}, and tokens z < c are masked.  That is vLLM's rule (drop the
  ascending prefix whose cumulative probability is <= 1 - p, keep at least the largest token) with the
  cut as a value, so ties at the cut stay together.  Rows with p >= 1 are left as they are.
The torch formulation of the same decisions (sort + int64 cumsum) is `rowwise.reference_top_k_top_p`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor
from vosti_plugin.launch import guard
from vosti_plugin.triton_mode import interpreting, use_lane_invariant_interpreter

use_lane_invariant_interpreter()

__all__ = ["KEY_INF", "SEARCH_STEPS", "select_config", "top_k_top_p"]

KEY_INF = 255 * 2**23            # ordered key of +inf (bits of +inf)
SEARCH_STEPS = 32                # (KEY_INF + 1) - (-KEY_INF) < 2**32: 32 halvings leave one key
_KEY_INF = tl.constexpr(float(KEY_INF))
_STEPS = tl.constexpr(SEARCH_STEPS)
_KEY_SPAN_HI = tl.constexpr(float(KEY_INF + 1))
_MANT = tl.constexpr(float(2**23))
_INV_MANT = tl.constexpr(2.0**-23)
_FIXED_ONE = tl.constexpr(float(2**52))
_P128 = tl.constexpr(2.0**128)
_P64 = tl.constexpr(2.0**64)
_P32 = tl.constexpr(2.0**32)
_P16 = tl.constexpr(2.0**16)
_P8 = tl.constexpr(2.0**8)
_P4 = tl.constexpr(2.0**4)
_P2 = tl.constexpr(2.0**2)
_P1 = tl.constexpr(2.0)
_BIAS = tl.constexpr(2.0**-127)
_DENORMAL = tl.constexpr(2.0**-126)


def select_config(vocab: int):
    """BLOCK and num_warps of vosti's softmax for rows of `vocab` (the same chunking, so the top-p
    probabilities are bitwise vosti's softmax). Never sees the row count."""
    from vosti_plugin.ops import softmax

    return softmax.select_config(vocab)


@triton.jit
def _key_value(key):
    """The fp32 value with ordered key `key` (an integral fp64 in [-KEY_INF, KEY_INF]), in fp64, exactly."""
    mag = tl.abs(key)
    e = tl.floor(mag * _INV_MANT)
    mant = mag - e * _MANT
    b7 = tl.floor(e * 0.0078125)
    r = e - b7 * 128.0
    b6 = tl.floor(r * 0.015625)
    r = r - b6 * 64.0
    b5 = tl.floor(r * 0.03125)
    r = r - b5 * 32.0
    b4 = tl.floor(r * 0.0625)
    r = r - b4 * 16.0
    b3 = tl.floor(r * 0.125)
    r = r - b3 * 8.0
    b2 = tl.floor(r * 0.25)
    r = r - b2 * 4.0
    b1 = tl.floor(r * 0.5)
    b0 = r - b1 * 2.0
    scale = tl.where(b7 > 0.5, _P128, 1.0).to(tl.float64)
    scale = scale * tl.where(b6 > 0.5, _P64, 1.0)
    scale = scale * tl.where(b5 > 0.5, _P32, 1.0)
    scale = scale * tl.where(b4 > 0.5, _P16, 1.0)
    scale = scale * tl.where(b3 > 0.5, _P8, 1.0)
    scale = scale * tl.where(b2 > 0.5, _P4, 1.0)
    scale = scale * tl.where(b1 > 0.5, _P2, 1.0)
    scale = scale * tl.where(b0 > 0.5, _P1, 1.0)
    normal = e > 0.5
    value = tl.where(normal, scale * _BIAS, _DENORMAL) * (tl.where(normal, 1.0, 0.0) + mant * _INV_MANT)
    return tl.where(key < 0.0, -value, value)


# Relational contract (checked by `vosti verify`): row x of a launch of any number of rows and the single
# row of a one-row launch, with equal logits rows and equal k and p, get equal masked rows.
# Why: program r reads row r of x and k[r], p[r] only; every reduction (counts, max, softmax sum,
# fixed-point sums) walks the chunks c0 = 0, BLOCK, ... < V in order into a BLOCK-wide accumulator
# reduced once; the search runs SEARCH_STEPS iterations whatever the data. The row count never enters.
_ROW_PRE = ("R.M == 1", "0 <= x < L.M", "L.x_ptr[x, :] == R.x_ptr[0, :]", "L.k_ptr[x] == R.k_ptr[0]",
            "L.p_ptr[x] == R.p_ptr[0]")


@contract(
    params={"x_ptr": tensor(("M", "V"), ("stride_x", 1)), "k_ptr": tensor(("M",), (1,)),
            "p_ptr": tensor(("M",), (1,)), "y_ptr": tensor(("M", "V"), ("stride_y", 1))},
    grid=("M",),
    verif=[goal("row_invariance", same=("V",), pre=_ROW_PRE, post=("L.y_ptr[x, :] == R.y_ptr[0, :]",))],
    symbolic=("BLOCK",),
    assume=("BLOCK >= 1",),
)
@triton.jit
def top_k_top_p_kernel(
    x_ptr, k_ptr, p_ptr, y_ptr,
    V,
    stride_x, stride_y,
    HAS_K: tl.constexpr,
    HAS_P: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    kth = tl.full((), float("-inf"), tl.float32)
    if HAS_K:
        k = tl.load(k_ptr + row)  # float, in [1, V] (the wrapper clamps)
        lo = tl.full((), -_KEY_INF, tl.float64)  # #{x >= -inf} = V >= k
        hi = tl.full((), _KEY_SPAN_HI, tl.float64)  # past +inf: never reached
        for _step in range(0, _STEPS):
            mid = tl.floor((lo + hi) * 0.5)
            t = _key_value(mid).to(tl.float32)
            count = tl.zeros((BLOCK,), dtype=tl.float32)
            for c0 in range(0, V, BLOCK):
                cols = c0 + tl.arange(0, BLOCK)
                v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
                count += tl.where(v >= t, 1.0, 0.0)
            enough = tl.sum(count, axis=0) >= k
            lo = tl.where(enough, mid, lo)
            hi = tl.where(enough, hi, mid)
        kth = _key_value(lo).to(tl.float32)
    cut = tl.full((), float("-inf"), tl.float32)
    if HAS_P:
        p = tl.load(p_ptr + row)
        limit = tl.floor((1.0 - p).to(tl.float64) * _FIXED_ONE)
        run_max = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        for c0 in range(0, V, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
            z = tl.where(v < kth, float("-inf"), v)
            run_max = tl.maximum(run_max, z)
        m = tl.max(run_max, axis=0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, V, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            ok = cols < V
            v = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=float("-inf")).to(tl.float32)
            z = tl.where(v < kth, float("-inf"), v)
            acc += tl.where(ok, tl.exp(z - m), 0.0)
        s = tl.sum(acc, axis=0)
        lo = tl.full((), -_KEY_INF, tl.float64)  # below(-inf) = 0 <= limit
        hi = tl.full((), _KEY_SPAN_HI, tl.float64)
        for _step in range(0, _STEPS):
            mid = tl.floor((lo + hi) * 0.5)
            t = _key_value(mid).to(tl.float32)
            below = tl.zeros((BLOCK,), dtype=tl.float64)
            for c0 in range(0, V, BLOCK):
                cols = c0 + tl.arange(0, BLOCK)
                v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
                z = tl.where(v < kth, float("-inf"), v)
                fixed = tl.floor((tl.exp(z - m) / s).to(tl.float64) * _FIXED_ONE)
                below += tl.where(z < t, fixed, 0.0)
            within = tl.sum(below, axis=0) <= limit
            lo = tl.where(within, mid, lo)
            hi = tl.where(within, hi, mid)
        t = _key_value(lo).to(tl.float32)
        kept = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        for c0 in range(0, V, BLOCK):
            cols = c0 + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
            z = tl.where(v < kth, float("-inf"), v)
            kept = tl.maximum(kept, tl.where(z <= t, z, float("-inf")))
        cut = tl.where(p < 1.0, tl.max(kept, axis=0), float("-inf"))
    for c0 in range(0, V, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < V
        v = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
        vf = v.to(tl.float32)
        y = tl.where((vf < kth) | (vf < cut), float("-inf"), vf)
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """vLLM's `apply_top_k_top_p` (top-k, then top-p over what is left) on a 2-D [rows, vocab] tensor, in
    place (also returned). k: per-row top-k (>= vocab: none); p: per-row top-p (>= 1: none)."""
    if k is None and p is None:
        return logits
    cpu = logits.device.type == "cpu"
    if cpu and not interpreting():
        raise RuntimeError("vosti sampler ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
    rows, vocab = logits.shape
    x2 = logits.float() if cpu else logits
    x2 = x2 if x2.stride(-1) == 1 else x2.contiguous()
    kf = (k.to(device=logits.device, dtype=torch.float32).view(-1).clamp(1, vocab) if k is not None
          else torch.empty((rows,), device=logits.device, dtype=torch.float32))
    pf = (p.to(device=logits.device, dtype=torch.float32).view(-1) if p is not None
          else torch.empty((rows,), device=logits.device, dtype=torch.float32))
    y = torch.empty(x2.shape, device=logits.device, dtype=x2.dtype)
    if rows > 0 and vocab > 0:
        cfg = select_config(vocab)
        guard.check(top_k_top_p_kernel, (x2.shape[0],), HAS_K=k is not None, HAS_P=p is not None, BLOCK=cfg.block)
        top_k_top_p_kernel[(x2.shape[0],)](
            x2, kf, pf, y, x2.shape[1], x2.stride(0), y.stride(0),
            HAS_K=k is not None, HAS_P=p is not None, BLOCK=cfg.block, num_warps=cfg.num_warps,
        )
    logits.copy_(y)
    return logits


def verifier_catalog() -> list[dict]:
    """Every constexpr config `top_k_top_p` can launch: softmax's block for any vocabulary (each power of
    two up to its maximum) with top-k, top-p or both."""
    import dataclasses

    from vosti_plugin.ops import softmax

    cfgs = [select_config(1 << i) for i in range(softmax._MAX_BLOCK.bit_length())]
    return [{"family": "sampling", "kernel": top_k_top_p_kernel,
             "configs": [({"BLOCK": c.block, "HAS_K": hk, "HAS_P": hp}, dataclasses.asdict(c))
                         for c in cfgs for hk, hp in ((True, False), (False, True), (True, True))]}]
