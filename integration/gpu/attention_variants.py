"""Paged-attention kernel variants on a CUDA GPU: which keep the shipped kernel's bits and what they gain.

    python integration/gpu/attention_variants.py --out $OUT/attention_variants.json
    python integration/gpu/attention_variants.py --cpu-smoke --out /tmp/av.json     # logic check, no GPU

A variant is the shipped module `vosti_plugin/attention/paged_attention.py` with source edits (VARIANTS), loaded
as its own module; `upper bound` variants drop work the contract needs and only show what that work costs.
Cases are one layer call as the backend makes it (workspace preallocated, block table as wide as max_model_len,
so the segment grid follows it): a 2048-token chunk of one prompt at KV length 8K / 16K (chunked prefill), and
decode at batch 1 / 4 / 16 over 1K and 8K of context, with a grid for the context and for Llama-3.1's default
max_model_len (128K), and at 8K on the fused path (what a deployment whose split workspace does not fit runs).
Each variant's output is compared bit for bit with the shipped kernel's.
Timing: triton.testing.do_bench (prefill) and do_bench_cudagraph (decode), median ms.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import textwrap
import inspect
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

if "--cpu-smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402

from vosti_plugin.attention import paged_attention as shipped  # noqa: E402
from vosti_plugin.attention.config import fold_config, next_power_of_two, prefill_config, select_config  # noqa: E402
from vosti_plugin.attention.paged_batch import build_paged_batch, random_request  # noqa: E402

SOURCE = shipped.__file__
# the tile loops' code sits in the segment loop's `else` of FOLD (16 spaces in)
_LIVE_SELECTS = """                m_i = tl.where(tile_live, m_new, m_i)
                l_i = tl.where(tile_live, l_new, l_i)
                acc = tl.where(tile_live[:, None], acc_new, acc)
"""
_NO_SELECTS = """                m_i = m_new
                l_i = l_new
                acc = acc_new
"""
# The combine over a block of heads of one token (all heads of a token share the segment range).
_COMBINE_HEADS = '''

@triton.jit
def _combine_heads_kernel(out_ptr, part_m_ptr, part_l_ptr, part_acc_ptr, seq_lens_ptr, query_start_loc_ptr,
                          num_seqs, num_q_heads, num_segments, window, stride_ot, stride_oh,
                          HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, HEADS: tl.constexpr,
                          SEGMENT: tl.constexpr, SEQ_SCAN_CHUNK: tl.constexpr, USE_WINDOW: tl.constexpr,
                          PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()
    token = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    head_ok = heads < num_q_heads
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    out_rows = out_ptr + token.to(tl.int64) * stride_ot + heads[:, None] * stride_oh + dims[None, :]
    ok = head_ok[:, None] & dim_ok[None, :]
    seq = 0
    for chunk in range(0, num_seqs, SEQ_SCAN_CHUNK):
        seq_ids = chunk + tl.arange(0, SEQ_SCAN_CHUNK)
        in_range = seq_ids < num_seqs
        ends = tl.load(query_start_loc_ptr + seq_ids + 1, mask=in_range, other=0)
        seq += tl.sum((in_range & (ends <= token)).to(tl.int32), axis=0)
    if seq >= num_seqs:
        tl.store(out_rows, tl.zeros([HEADS, HEAD_DIM_PAD], dtype=tl.float32).to(out_ptr.dtype.element_ty), mask=ok)
        return
    q_start = tl.load(query_start_loc_ptr + seq)
    q_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    pos = tl.load(seq_lens_ptr + seq) - q_len + (token - q_start)
    if USE_WINDOW:
        lo = tl.maximum(pos - window + 1, 0)
    else:
        lo = 0
    run_m = tl.full([HEADS], float("-inf"), dtype=tl.float32)
    run_l = tl.zeros([HEADS], dtype=tl.float32)
    run_acc = tl.zeros([HEADS, HEAD_DIM_PAD], dtype=tl.float32)
    part_row = (token.to(tl.int64) * num_q_heads + heads) * num_segments
    for seg in range(lo // SEGMENT, pos // SEGMENT + 1):
        m_i = tl.load(part_m_ptr + part_row + seg, mask=head_ok, other=0.0)
        l_i = tl.load(part_l_ptr + part_row + seg, mask=head_ok, other=0.0)
        acc = tl.load(part_acc_ptr + (part_row[:, None] + seg) * HEAD_DIM + dims[None, :], mask=ok, other=0.0)
        fold_m = tl.maximum(run_m, m_i)
        fold_dead = fold_m == float("-inf")
        run_scale = tl.where(fold_dead, 1.0, tl.exp2(run_m - fold_m))
        seg_scale = tl.where(fold_dead, 0.0, tl.exp2(m_i - fold_m))
        fold_l = run_l * run_scale + l_i * seg_scale
        fold_acc = run_acc * run_scale[:, None] + acc * seg_scale[:, None]
        run_m = fold_m
        run_l = fold_l
        run_acc = fold_acc
    result = run_acc / run_l[:, None]
    tl.store(out_rows, result.to(out_ptr.dtype.element_ty), mask=ok)
'''
_COMBINE_LAUNCH_OLD = "        _combine_segments_kernel[(num_tokens, num_q_heads)](\n"


def _combine_heads_edits(heads: int, warps: int) -> tuple[list[tuple[str, str]], bool]:
    return ([(_COMBINE_LAUNCH_OLD, f"        _combine_heads_kernel[(num_tokens, triton.cdiv(num_q_heads, {heads}))](\n"),
             ("            SEGMENT=config.segment,\n            SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK,\n"
              "            USE_WINDOW=use_window,\n            PDL=pdl,\n            num_warps=1,",
              f"            HEADS={heads},\n            SEGMENT=config.segment,\n"
              f"            SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK,\n            USE_WINDOW=use_window,\n"
              f"            PDL=pdl,\n            num_warps={warps},"),
             ("\n\ndef num_kv_segments", _COMBINE_HEADS + "\n\ndef num_kv_segments")], True)


_PAGE_LOAD = "                    page = tl.load(block_table_row + key_pos // PAGE_SIZE, mask=key_valid, other=0).to(tl.int64)\n"
_TILE_LOOP = "            for tile in range(whole_end, tile_end):\n"  # the masked tile loop


_COMBINE_LOOP = "    for seg in range(lo // SEGMENT, pos // SEGMENT + 1):\n"
_COMBINE_WARPS = "            num_warps=1,\n            num_stages=1,\n"


def _tile_stages(n: int) -> list[tuple[str, str]]:
    return [(_TILE_LOOP, f"            for tile in tl.range(whole_end, tile_end, num_stages={n}):\n")]


def _combine_edits(warps: int, stages: int) -> list[tuple[str, str]]:
    out = [(_COMBINE_WARPS, f"            num_warps={warps},\n            num_stages=1,\n")]
    if stages > 1:
        out.append((_COMBINE_LOOP, f"    for seg in tl.range(lo // SEGMENT, pos // SEGMENT + 1, num_stages={stages}):\n"))
    return out


_NO_MASK_SELECTS = [("                scores = tl.where(allowed, scores, float(\"-inf\"))\n", ""),
                    (_LIVE_SELECTS, _NO_SELECTS)]
_M128 = {"block_m": 128, "num_warps": 8}


# l's row sum as an MMA (the shipped kernel's ROW_SUMS_BY_DOT, VOSTI_ATTENTION_ROW_SUMS=dot): its per-row bits follow
# the dot, not tl.sum's layout tree
_DOT = {"row_sums_by_dot": True}

_WHOLE_LOOP = "            for tile in range(tile_begin, whole_end):\n"  # the unmasked loop (tiles every row sees whole)
_LAUNCH_NO_FMA = "        enable_fp_fusion=False,\n        launch_pdl=pdl,\n    )\n\n\ndef paged_attention("


def _whole_loop(**options) -> list[tuple[str, str]]:
    args = "".join(f", {k}={v}" for k, v in options.items())
    return [(_WHOLE_LOOP, f"            for tile in tl.range(tile_begin, whole_end{args}):\n")]


# A KV tile that is one page (PAGE_SIZE == BLOCK_N: vosti's default page of 64 on CUDA; --page for the CPU smoke): one
# block-table entry per tile and a scalar page base added to in-tile offsets, where the shipped loops look up a page and
# form a 64-bit address per key. The same keys, so the same bits where the page is a tile (these edits assume it).
# H100, session 33 (`git show 160788e:integration/results/h100-s33/README.md`): offsets formed once before the
# loops stay live across them (Llama spills 22 -> 60 B) and cost Llama's fused prefill and decode 10-12 %, Gemma's
# global layers 6-11 %; formed in each iteration, -3 % (Llama's split prefill) to +13 %; only Gemma's window layers
# gain (1-13 %) either way.
_TILE_OFFSETS_BEFORE = "    block_table_row = block_table_ptr + seq.to(tl.int64) * stride_bt\n"


def _tile_is_page(hoisted: bool) -> list[tuple[str, str]]:
    def offsets(stride: str) -> str:
        return f"(tl.arange(0, BLOCK_N) * {stride}).to(tl.int64)[:, None] + dims[None, :]"

    k_off, v_off = ("k_tile_offsets", "v_tile_offsets") if hoisted else (offsets("stride_kp"), offsets("stride_vp"))
    edits = [(_TILE_OFFSETS_BEFORE, _TILE_OFFSETS_BEFORE + (
        f"    k_tile_offsets = {offsets('stride_kp')}\n    v_tile_offsets = {offsets('stride_vp')}\n"))] if hoisted else []
    for masked in (False, True):
        mask = ", mask=key_valid, other=0" if masked else ""
        kv_mask = "key_valid[:, None] & dim_ok[None, :]" if masked else "dim_ok[None, :]"
        edits.append((f"                    page = tl.load(block_table_row + key_pos // PAGE_SIZE{mask}).to(tl.int64)\n"
                       "                    in_page = key_pos % PAGE_SIZE\n"
                       "                    k_offsets = page * stride_kb + in_page * stride_kp + kv_head * stride_kh\n"
                       "                    v_offsets = page * stride_vb + in_page * stride_vp + kv_head * stride_vh\n"
                       f"                    k = tl.load(k_ptr + k_offsets[:, None] + dims[None, :], mask={kv_mask}",
                       "                    page = tl.load(block_table_row + tile).to(tl.int64)\n"
                       f"                    k = tl.load(k_ptr + (page * stride_kb + kv_head * stride_kh) + {k_off}, "
                       f"mask={kv_mask}"))
        edits.append((f"                    v = tl.load(v_ptr + v_offsets[:, None] + dims[None, :], mask={kv_mask}",
                      f"                    v = tl.load(v_ptr + (page * stride_vb + kv_head * stride_vh) + {v_off}, "
                      f"mask={kv_mask}"))
    return edits


_WINDOW_BOUNDS = """            if USE_WINDOW:
                whole_end = tile_begin
            else:
                whole_end = tl.minimum(tl.maximum((context_len + first_local_token + 1) // BLOCK_N, tile_begin),
                                       tile_end)
"""
_MASKED_LOOP_END = "\n        if PROBE or not FUSED:\n"
_SEGMENT_LOOP = "    for seg in range(seg_begin, seg_end, SEGMENT_STRIDE):\n"


def _window_middle_unmasked() -> list[tuple[str, str]]:
    """A window layer's tiles in three loops: masked tiles below the window start of the block's last row, then the
    tiles every row of the block sees whole (from that start to its first row) without the selects, then the masked
    tiles up to its last row. The shipped kernel runs every tile of a window layer masked (whole_end = tile_begin);
    in a tile every row sees whole, the selects keep every value, so the bits are the same. The verifier proves the
    three loops (CPU, session 34: the catalog's first group of each goal 93 / 150 / 33 s against the shipped kernel's
    15 / 30 / 9 s), so shipping it would cost the proofs about 5x."""
    source = open(SOURCE).read()
    begin = source.index(_TILE_LOOP)
    masked = source[begin:source.index(_MASKED_LOOP_END, begin)] + "\n"
    lead = masked.replace(_TILE_LOOP, "            for tile in range(tile_begin, lead_end):\n", 1)
    bounds = """            lead_end = tile_begin
            if USE_WINDOW:
                lead_end = tl.minimum(tl.maximum((last_pos - window + BLOCK_N) // BLOCK_N, tile_begin), tile_end)
            whole_end = tl.minimum(tl.maximum((context_len + first_local_token + 1) // BLOCK_N, lead_end), tile_end)
""" + lead
    return [(_WINDOW_BOUNDS, bounds), (_WHOLE_LOOP, "            for tile in range(lead_end, whole_end):\n")]


_FOLD_START = "        if FUSED:\n            # The fold below is the same expression as in _combine_segments_kernel.\n"
_FOLD_END = "            run_acc = tl.where(seg_live[:, None], fold_acc, run_acc)\n"


def _flat_segments() -> list[tuple[str, str]]:
    """Fused launches (not FOLD, not PROBE) walk every key tile of the block in one loop, the masked tile code on each
    tile, and fold a segment's partial at its last tile (then start the next from -inf, 0, 0), so the TMA pipeline
    runs on across segment boundaries where the shipped kernel starts a loop per segment. The same tiles in the same
    order, the same partials and the same folds: the same bits (a tile every row sees whole gives the masked code's
    selects nothing to drop). Split and FOLD launches keep the shipped loop."""
    source = open(SOURCE).read()
    begin = source.index(_TILE_LOOP)
    body = source[begin + len(_TILE_LOOP):source.index(_MASKED_LOOP_END, begin)]
    fold = source[source.index(_FOLD_START) + len(_FOLD_START):source.index(_FOLD_END) + len(_FOLD_END)]
    flat = ("    if FUSED and not FOLD and not PROBE:\n"
            "        flat_end = last_pos // BLOCK_N + 1\n"
            "        m_i = tl.full([BLOCK_M], float(\"-inf\"), dtype=tl.float32)\n"
            "        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)\n"
            "        acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)\n"
            "        for tile in range(tl.maximum(seg_begin * TILES_PER_SEGMENT, first_key // BLOCK_N), flat_end):\n"
            + textwrap.indent(textwrap.dedent(body), " " * 12)
            + "            if ((tile + 1) % TILES_PER_SEGMENT == 0) or (tile + 1 == flat_end):\n"
            "                seg = tile // TILES_PER_SEGMENT\n"
            + textwrap.indent(textwrap.dedent(fold), " " * 16)
            + "                m_i = tl.full([BLOCK_M], float(\"-inf\"), dtype=tl.float32)\n"
            "                l_i = tl.zeros([BLOCK_M], dtype=tl.float32)\n"
            "                acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)\n"
            "    else:\n")
    loop_begin = source.index(_SEGMENT_LOOP)
    loop = source[loop_begin:source.index(_FOLD_END, loop_begin) + len(_FOLD_END)]
    return [(loop, flat + textwrap.indent(loop, "    "))]


# the dot row sums' column of ones made once per program, where the shipped step makes it in every tile
_ONES_HOISTED = [
    ("                         ROW_SUMS_BY_DOT: tl.constexpr):\n", "                         ROW_SUMS_BY_DOT: tl.constexpr, ones):\n"),
    ("        ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(v.dtype)\n", ""),
    ("    run_m = tl.full([BLOCK_M], float(\"-inf\"), dtype=tl.float32)\n",
     "    ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(k_ptr.dtype.element_ty)\n"
     "    run_m = tl.full([BLOCK_M], float(\"-inf\"), dtype=tl.float32)\n"),
    ("acc, DOT_PRECISION, BLOCK_N, ROW_SUMS_BY_DOT)\n", "acc, DOT_PRECISION, BLOCK_N, ROW_SUMS_BY_DOT, ones)\n"),
    ("                                                             ROW_SUMS_BY_DOT)\n",
     "                                                             ROW_SUMS_BY_DOT, ones)\n"),
]

# the dot row sums accumulated by the MMA itself, as acc is: l is 16 equal columns until the segment's end (one max
# there), where the shipped step reduces the dot's columns and adds in every tile
_L_IN_MMA = [
    ("        l_new = l_i * alpha + tl.max(tl.dot(p.to(v.dtype), ones, input_precision=DOT_PRECISION), axis=1)\n",
     "        l_new = tl.dot(p.to(v.dtype), ones, l_i * alpha[:, None], input_precision=DOT_PRECISION)\n"),
    ("            l_i = tl.zeros([BLOCK_M], dtype=tl.float32)\n",
     "            l_i = tl.zeros([BLOCK_M], dtype=tl.float32)\n"
     "            if ROW_SUMS_BY_DOT:\n                l_i = tl.zeros([BLOCK_M, 16], dtype=tl.float32)\n"),
    ("                l_i = tl.where(tile_live, l_new, l_i)\n",
     "                if ROW_SUMS_BY_DOT:\n                    l_i = tl.where(tile_live[:, None], l_new, l_i)\n"
     "                else:\n                    l_i = tl.where(tile_live, l_new, l_i)\n"),
    ("                acc = tl.where(tile_live[:, None], acc_new, acc)\n",
     "                acc = tl.where(tile_live[:, None], acc_new, acc)\n"
     "            if ROW_SUMS_BY_DOT:\n                l_i = tl.max(l_i, axis=1)\n"),
]

# name: (edits [(old, new)], keeps the bits[, launch-config fields to override])
VARIANTS: dict[str, tuple] = {
    "shipped": ([], True),
    "tile loop 3 stages": (_tile_stages(3), True),
    "tile loop 4 stages": (_tile_stages(4), True),
    "tile loop 1 stage": (_tile_stages(1), True),
    "combine w4": (_combine_edits(4, 1), True),
    "combine w1, loop 2 stages": (_combine_edits(1, 2), True),
    "combine w4, loop 3 stages": (_combine_edits(4, 3), True),
    "combine 8 heads w4": _combine_heads_edits(8, 4),
    "window layers: middle tiles unmasked": (_window_middle_unmasked(), True),
    "max_seq_len reduced per call": ([("    if max_seq_len is None:\n", "    if True:\n")], True),
    "tiles of 128 rows, 8 warps": ([], True, _M128),
    "tiles of 128 rows, 8 warps, 3 stages": ([], True, {**_M128, "num_stages": 3}),
    # the deployment VOSTI_PREFILL_FUSED_FROM makes (config.prefill_config, config.fold_config): the split path's
    # combine as a FOLD launch; prefill steps fused in taller tiles
    "FOLD combine": ([], True, {"fold": True}),
    "fused prefill, FOLD combine": ([], True, {"fold": True, "prefill_fused": True}),
    "FOLD combine, 4 warps": ([], True, {"fold": True, "fold_warps": 4}),
    "FOLD combine, 1 warp": ([], True, {"fold": True, "fold_warps": 1}),
    # a FOLD program walks a row's segments one after another (the combine kernel: a program a query head, 4x the
    # programs at Llama's group): do more stages keep more of the walk's loads in flight?
    "FOLD combine, 3 stages": ([], True, {"fold": True, "fold_stages": 3}),
    "FOLD combine, 4 stages": ([], True, {"fold": True, "fold_stages": 4}),
    # config.fold_config runs a program per token and query head (the combine kernel's parallelism); session 34's
    # FOLD ran a program per token and KV head (its query heads together), on 8 warps
    "FOLD combine, a program per KV head": ([], True, {"fold": True, "fold_heads": 0}),
    "FOLD combine, a program per 2 query heads": ([], True, {"fold": True, "fold_heads": 2}),
    # tile height changes prefill bits on the H200 (session 19, Gemma-3-4B heads): decode-only candidates
    "tiles of 16 rows": ([], False, {"block_m": 16}),
    "tiles of 16 rows, 3 stages": ([], False, {"block_m": 16, "num_stages": 3}),
    "tiles of 32 rows": ([], False, {"block_m": 32}),
    # a 64-row tile on 4 warps holds 16 rows per warp (Gemma's 8 warps: 8, or 16 with a row's keys on two warps);
    # do smaller tiles on 1 or 2 warps keep the row sum's reduction tree, and so the bits?
    "tiles of 16 rows, 1 warp": ([], False, {"block_m": 16, "num_warps": 1}),
    "tiles of 16 rows, 2 warps": ([], False, {"block_m": 16, "num_warps": 2}),
    "tiles of 32 rows, 2 warps": ([], False, {"block_m": 32, "num_warps": 2}),
    # is the tile-height dependence the row sum's reduction tree? digests tell whether these two agree
    "row sums by dot (other bits)": ([], False, _DOT),
    "row sums by dot, tiles of 16 rows (other bits)": ([], False, {**_DOT, "block_m": 16}),
    # split programs per query block and head: the shipped SPLIT_SEGMENT_STRIDE against one program a segment (the
    # grid spans max_model_len) and other strides; a segment's partial is the same code whatever the stride
    "one program a segment": ([], True, {"segment_stride": 1 << 20}),
    "segment stride 16": ([], True, {"segment_stride": 16}),
    "segment stride 64": ([], True, {"segment_stride": 64}),
    "4 warps": ([], True, {"num_warps": 4}),
    "8 warps": ([], True, {"num_warps": 8}),
    "segments of 256 (other bits)": ([], False, {"segment": 256}),
    "segments of 128 (other bits)": ([], False, {"segment": 128}),
    "KV tiles of 128 (other bits)": ([], False, {"block_n": 128}),
    "tiles of 128 rows and 128 keys, 8 warps (other bits)": ([], False, {**_M128, "block_n": 128}),
    # prefill: what the unmasked loop's schedule and the contraction ban cost
    "whole loop warp-specialized": (_whole_loop(warp_specialize=True), True),
    "whole loop 3 stages": (_whole_loop(num_stages=3), True),
    "whole loop 3 stages, 128 rows, 8 warps, fused": (_whole_loop(num_stages=3), True, {**_M128, "fused_only": True}),
    # row sums by dot make the bits independent of tile height (H200, session 21): prefill in 128-row fused tiles?
    "row sums by dot, tiles of 128 rows, 8 warps, fused (other bits)": ([], False,
                                                                        {**_DOT, **_M128, "fused_only": True}),
    "fp fusion on (other bits)": ([(_LAUNCH_NO_FMA, _LAUNCH_NO_FMA.replace("False", "True"))], False),
    "upper bound: no mask selects": (_NO_MASK_SELECTS, False),
    "KV tile is a page, offsets formed once": (_tile_is_page(hoisted=True), True),
    "KV tile is a page, offsets formed in the loop": (_tile_is_page(hoisted=False), True),
    "3 stages": ([], True, {"num_stages": 3}),
    "4 stages": ([], True, {"num_stages": 4}),
    "upper bound: identity pages": ([(_PAGE_LOAD, "                    page = (key_pos // PAGE_SIZE).to(tl.int64)\n")], False),
    # prefill launches in config.prefill_config's tiles (what a deployment runs): what the segment loop costs
    "prefill tiles": ([], True, {"prefill_fused": True}),
    "prefill tiles, segments of 16384 (other bits)": ([], False, {"prefill_fused": True, "segment": 16384}),
    "prefill tiles, segment loop flattened": (
        [(_SEGMENT_LOOP, _SEGMENT_LOOP.replace("range(seg_begin, seg_end, SEGMENT_STRIDE)",
                                               "tl.range(seg_begin, seg_end, SEGMENT_STRIDE, flatten=True)"))],
        True, {"prefill_fused": True}),
    "prefill tiles, 128 rows, 8 warps": ([], True, {"prefill_fused": True, **_M128}),
    "prefill tiles, 128 rows, 8 warps, 2 stages": ([], True, {"prefill_fused": True, **_M128, "num_stages": 2}),
    "prefill tiles, segments of 1024 (other bits)": ([], False, {"prefill_fused": True, "segment": 1024}),
    "prefill tiles, segments of 2048 (other bits)": ([], False, {"prefill_fused": True, "segment": 2048}),
    "segments of 1024 (other bits)": ([], False, {"segment": 1024}),
    "segments of 2048 (other bits)": ([], False, {"segment": 2048}),
    "prefill tiles, 8 warps": ([], True, {"prefill_fused": True, "num_warps": 8}),
    "prefill tiles, 8 warps, 2 stages": ([], True, {"prefill_fused": True, "num_warps": 8, "num_stages": 2}),
    "prefill tiles, 8 warps, 4 stages": ([], True, {"prefill_fused": True, "num_warps": 8, "num_stages": 4}),
    "prefill tiles, 16 warps": ([], True, {"prefill_fused": True, "num_warps": 16}),
    "prefill tiles, 16 warps, 2 stages": ([], True, {"prefill_fused": True, "num_warps": 16, "num_stages": 2}),
    "prefill tiles, 32 rows": ([], True, {"prefill_fused": True, "block_m": 32}),
    "prefill tiles, window middle tiles unmasked": (_window_middle_unmasked(), True, {"prefill_fused": True}),
    "prefill tiles, segments in one tile loop": (_flat_segments(), True, {"prefill_fused": True}),
    # a geometry on tl.sum's row sums (Llama) with dot row sums, which its 16-row decode tiles need: the prefill's cost
    "prefill tiles, row sums by dot (other bits)": ([], False, {"prefill_fused": True, **_DOT}),
    "prefill tiles, 128 rows, 8 warps, row sums by dot (other bits)": (
        [], False, {"prefill_fused": True, **_M128, **_DOT}),
    "prefill tiles, 128 rows, 8 warps, 2 stages, row sums by dot (other bits)": (
        [], False, {"prefill_fused": True, **_M128, **_DOT, "num_stages": 2}),
    "prefill tiles, row sums by dot, ones made once (other bits)": (_ONES_HOISTED, False, {"prefill_fused": True, **_DOT}),
    "row sums by dot, tiles of 16 rows, ones made once (other bits)": (_ONES_HOISTED, False, {**_DOT, "block_m": 16}),
    "prefill tiles, row sums in the MMA (other bits)": (_L_IN_MMA, False, {"prefill_fused": True, **_DOT}),
    "row sums in the MMA, tiles of 16 rows (other bits)": (_L_IN_MMA, False, {**_DOT, "block_m": 16}),
    "row sums in the MMA (other bits)": (_L_IN_MMA, False, _DOT),
    "upper bound: no combine": ([("    if not fused:\n        pdl = dependent_launch.enabled(out)\n", "    if False:\n        pdl = False\n")],
                                False),
}


class LaunchedKernels:
    """The compiled kernels the launches inside the context ran: registers, spills and shared memory from the
    driver (what `python -m vosti_plugin.integration.sm90_static` reads off the cubin on a CPU)."""

    def __enter__(self) -> dict:
        from triton.runtime.jit import JITFunction

        self._run, self.kernels = JITFunction.run, {}

        def run(fn, *args, **kwargs):
            k = self._run(fn, *args, **kwargs)
            self.kernels[fn.fn.__name__] = k
            return k

        JITFunction.run = run
        return self.kernels

    def __exit__(self, *exc) -> None:
        from triton.runtime.jit import JITFunction

        JITFunction.run = self._run
        for name, k in list(self.kernels.items()):
            self.kernels[name] = {"regs": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                                  "shared": k.metadata.shared, "warps": k.metadata.num_warps}


def variant_launch(config, fields: dict, path: str, mode: str, head_dim: int, page: int):
    """A variant's (launch config, path, FOLD config): "prefill_fused" runs prefill cases fused in
    config.prefill_config's tiles, "fold" gives split launches a FOLD combine (config.fold_config); the other fields
    replace the shipped config's."""
    fields = dict(fields)
    fold = fold_config(config, head_dim) if fields.pop("fold", False) else None
    if "fold_warps" in fields:   # the FOLD combine's warps and software-pipeline stages (variants with "fold")
        fold = dataclasses.replace(fold, num_warps=fields.pop("fold_warps"))
    if "fold_stages" in fields:
        fold = dataclasses.replace(fold, num_stages=fields.pop("fold_stages"))
    if "fold_heads" in fields:   # query heads a FOLD program folds (0: all of its KV head's)
        heads = fields.pop("fold_heads") or config.group
        fold = dataclasses.replace(fold, block_m=heads, head_blocks=-(-config.queries_per_kv // heads),
                                   num_warps=min(8, max(1, heads * next_power_of_two(head_dim) // 64)))
    if fields.pop("prefill_fused", False) and mode == "prefill":
        return variant_config(prefill_config(config, head_dim, page), fields, "fused"), "fused", None
    return variant_config(config, fields, path), path, fold if path == "split" else None


def variant_config(config, fields: dict, path: str):
    """A variant's launch config: the shipped one with the variant's fields; "fused_only" tile fields apply to
    fused launches only (the row sums to every launch), and block_q follows block_m."""
    fields = dict(fields)
    if fields.pop("fused_only", False) and path != "fused":
        fields = {k: v for k, v in fields.items() if k == "row_sums_by_dot"}
    if "block_m" in fields:
        fields["block_q"] = fields["block_m"] // config.group
    return dataclasses.replace(config, **fields)


def apply(source: str, edits: list[tuple[str, str]], what: str) -> str:
    """`source` with each (old, new) edit made; an anchor found other than once raises (the kernel changed)."""
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{what} changed: edit anchor found {source.count(old)} times: {old[:70]!r}")
        source = source.replace(old, new)
    return source


def load_variant(name: str, edits: list[tuple[str, str]], tmp: str, source: str = SOURCE):
    src = apply(open(source).read(), edits, f"variant {name!r}: the shipped kernel")
    path = os.path.join(tmp, "variant_" + "".join(c if c.isalnum() else "_" for c in name) + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# q heads, kv heads, head_dim, sliding window of the window layers (None: every layer global)
GEOMETRIES = {"llama31-8b": (32, 8, 128, None), "gemma3-4b": (8, 4, 256, 1024)}


def cases(smoke: bool, device: str, dtype: torch.dtype, geometry: str = "llama31-8b",
          decode_batches: tuple[int, ...] = (1, 4, 16), decode_only: bool = False,
          decode_contexts: tuple[int, ...] = (1024, 8192)):
    """(name, requests, max_model_len, mode, path, window) for a served geometry (Llama-3.1-8B: 32 q / 8 kv
    heads, head_dim 128; Gemma-3-4B: 8 q / 4 kv heads, head_dim 256, window layers of 1024 beside its global
    ones). max_model_len sizes the segment grid as the backend does; 131072 is both models' default."""
    if smoke:
        chunk = [random_request(256, 64, 4, 2, 32, seed=1, dtype=dtype, device=device)]
        pair = [random_request(200, 1, 4, 2, 32, seed=s, dtype=dtype, device=device) for s in (2, 3)]
        return [("prefill chunk 64 @ 256", chunk, 512, "prefill", "split", None),
                ("prefill chunk 64 @ 256, fused path", chunk, 512, "prefill", "fused", None),
                # a window wider than a tile's rows plus two KV tiles: tiles every row of a tile sees whole
                ("prefill chunk 64 @ 256, window 130", chunk, 512, "prefill", "split", 130),
                ("prefill chunk 64 @ 256, window 130, fused path", chunk, 512, "prefill", "fused", 130),
                ("decode b2 @ 200", pair, 512, "decode", "split", None),
                ("decode b2 @ 200, grid for 4K", pair, 4096, "decode", "split", None),
                ("decode b2 @ 200, window 64", pair, 4096, "decode", "split", 64)]
    hq, hkv, d, window = GEOMETRIES[geometry]
    kinds = [("", None)] if window is None else [(", window layer", window), (", global layer", None)]
    out = []
    for kv in () if decode_only else (8192, 16384):
        req = [random_request(kv, 2048, hq, hkv, d, seed=kv, dtype=dtype, device=device)]
        for label, w in kinds:
            out.append((f"prefill chunk 2048 @ {kv // 1024}K{label}", req, kv + 512, "prefill", "split", w))
            out.append((f"prefill chunk 2048 @ {kv // 1024}K{label}, fused path", req, kv + 512, "prefill", "fused", w))
    for ctx in decode_contexts:
        for b in decode_batches:
            reqs = [random_request(ctx, 1, hq, hkv, d, seed=100 + s, dtype=dtype, device=device) for s in range(b)]
            for label, w in kinds:
                out.append((f"decode b{b} @ {ctx // 1024}K{label}", reqs, ctx + 512, "decode", "split", w))
                if ctx < 131072:
                    out.append((f"decode b{b} @ {ctx // 1024}K{label}, grid for 128K", reqs, 131072, "decode", "split",
                                w))
                if ctx == 8192:
                    out.append((f"decode b{b} @ 8K{label}, fused path", reqs, 131072, "decode", "fused", w))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu-smoke", action="store_true")
    ap.add_argument("--previous", help="an earlier paged_attention.py, timed as variant 'previous'")
    ap.add_argument("--variants", help="comma-separated variant names to time beside 'shipped' (default: all)")
    ap.add_argument("--geometry", choices=sorted(GEOMETRIES), default="llama31-8b",
                    help="whose heads, head_dim and window the cases take")
    ap.add_argument("--decode-batches", default="1,4,16",
                    help="batches of the decode cases, e.g. 16,64 (a batch-64 step is where decode tiles' padding rows cost most)")
    ap.add_argument("--decode-only", action="store_true", help="leave out the prefill cases")
    ap.add_argument("--prefill-only", action="store_true", help="leave out the decode cases")
    ap.add_argument("--decode-contexts", default="1024,8192", help="KV lengths of the decode cases, e.g. 1024,32768")
    ap.add_argument("--page", type=int, default=None,
                    help="page size (default: vLLM's block size with vosti, 64 on CUDA; 16 for --cpu-smoke)")
    args = ap.parse_args()

    def positive_ints(option: str, text: str, what: str, example: str) -> tuple[int, ...]:
        try:
            values = tuple(int(v) for v in text.split(","))
        except ValueError:
            ap.error(f"{option} {text!r}: comma-separated {what}, e.g. {example}")
        if not values or min(values) < 1:
            ap.error(f"{option} {text!r}: {what} of at least 1")
        return values

    decode_batches = positive_ints("--decode-batches", args.decode_batches, "batch sizes", "16,64")
    decode_contexts = positive_ints("--decode-contexts", args.decode_contexts, "KV lengths", "1024,32768")
    if args.variants:
        keep = {"shipped", *(v for v in args.variants.split(";" if ";" in args.variants else ",") if v)}
        unknown = keep - set(VARIANTS)
        if unknown:
            ap.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
        for name in set(VARIANTS) - keep:
            del VARIANTS[name]
    smoke = args.cpu_smoke
    device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if smoke else torch.bfloat16
    tmp = tempfile.mkdtemp(prefix="attn_variants_")
    mods = {name: load_variant(name, v[0], tmp) for name, v in VARIANTS.items()}
    if args.previous:
        VARIANTS["previous"] = ([], False)
        mods["previous"] = load_variant("previous", [], tmp, args.previous)
    report: dict = {"device": torch.cuda.get_device_name() if not smoke else "cpu (interpreter)",
                    "geometry": args.geometry, "cases": {}}
    t0 = time.time()
    page = args.page or (16 if smoke else 64)  # 64: vLLM's block size with vosti on CUDA
    chosen = cases(smoke, device, dtype, args.geometry, decode_batches, args.decode_only, decode_contexts)
    if args.prefill_only:
        chosen = [c for c in chosen if c[3] == "prefill"]
    for case, requests, max_model_len, mode, path, window in chosen:
        batch = build_paged_batch(requests, page_size=page, seed=7)
        heads, dim = batch.q.shape[1], batch.q.shape[2]
        cfg = select_config(dim, heads, batch.k_cache.shape[2], page, dtype)
        # vLLM's block table has a column per page of max_model_len; the segment grid follows its width
        block_table = torch.zeros(batch.block_table.shape[0], max(batch.block_table.shape[1], -(-max_model_len // page)),
                                  dtype=batch.block_table.dtype, device=device)
        block_table[:, :batch.block_table.shape[1]] = batch.block_table
        smallest = min([cfg.segment] + [v[2]["segment"] for v in VARIANTS.values() if len(v) > 2 and "segment" in v[2]])
        segs = shipped.num_kv_segments(block_table, page, smallest, max_model_len)
        ws = torch.empty(2 * shipped.split_workspace_numel(batch.q.shape[0], heads, dim, segs), dtype=torch.float32,
                         device=device)
        step_max = batch.seq_lens.max().reshape(1).to(torch.int32)
        row = {}
        ref = None
        for name, mod in mods.items():
            out = batch.empty_out()
            fields = dict(VARIANTS[name][2]) if len(VARIANTS[name]) > 2 else {}
            stride = fields.pop("segment_stride", None)
            vcfg, vpath, vfold = variant_launch(cfg, fields, path, mode, dim, page)

            # a step's longest sequence is reduced once per step and shared by its layers
            params = inspect.signature(mod.paged_attention).parameters
            per_step = {"max_seq_len": step_max} if "max_seq_len" in params else {}
            if vfold is not None:
                per_step["fold"] = vfold
            if stride is not None and "segment_stride" in params:
                per_step["segment_stride"] = stride

            def call(mod=mod, out=out, vcfg=vcfg, vpath=vpath, per_step=per_step):
                mod.paged_attention(batch.q, batch.k_cache, batch.v_cache, block_table, batch.seq_lens,
                                    batch.query_start_loc, out, scale=dim ** -0.5, config=vcfg,
                                    sliding_window=window, max_seqlen_k=max_model_len, workspace=ws, path=vpath,
                                    **per_step)
            try:
                with LaunchedKernels() as launched:
                    call()
            except triton.runtime.errors.OutOfResources as e:
                row[name] = {"ms": None, "does_not_fit": str(e)[:120], "keeps_bits": VARIANTS[name][1]}
                print(f"{case:28s} {name:26s} does not fit: {e}", flush=True)
                continue
            except (triton.CompilationError, RuntimeError) as e:   # a schedule option this Triton cannot lower
                row[name] = {"ms": None, "does_not_compile": str(e)[-200:], "keeps_bits": VARIANTS[name][1]}
                print(f"{case:28s} {name:26s} does not compile: {str(e)[-200:]}", flush=True)
                continue
            if smoke:
                ms = float("nan")
            elif mode == "decode":
                ms = triton.testing.do_bench_cudagraph(call, rep=100)
            else:
                ms = triton.testing.do_bench(call, warmup=5, rep=100)
            if ref is None:
                ref = out.clone()
            same = bool(torch.equal(out.view(torch.int16 if dtype != torch.float32 else torch.int32),
                                    ref.view(torch.int16 if dtype != torch.float32 else torch.int32)))
            digest = hashlib.sha256(out.float().cpu().numpy().tobytes()).hexdigest()[:12]
            row[name] = {"ms": round(ms, 4), "bits_equal_shipped": same, "keeps_bits": VARIANTS[name][1],
                         "out_sha": digest, "kernels": launched}
            print(f"{case:28s} {name:26s} {ms:8.4f} ms  bits {'=' if same else '!='} shipped  out {digest}", flush=True)
        report["cases"][case] = row
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    report["wall_s"] = round(time.time() - t0, 1)
    bad = [(c, n) for c, r in report["cases"].items() for n, v in r.items() if v["keeps_bits"]
           and not v.get("bits_equal_shipped", True)]
    report["bit_preserving_variants_that_differ"] = bad
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print("bit-preserving variants that differ:", bad or "none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
