"""Deterministic paged attention: one algorithm for prefill, chunked prefill and decode.

Every query row at absolute position p visits KV tiles of `block_n` positions on a fixed grid that starts
at position 0 (with a sliding window: at the tile holding the window start), in increasing order, grouped
into segments of `segment` positions. Each segment yields a partial (m, l, acc); the partials of a row
are folded left to right. Tiles or segments that hold no key of a row are exact no-ops for that row
(selected away with `where`, never added as zeros), so the bits of a row depend only on its query, its
position, the window and the logical K/V on [0, p] — not on the batch, the chunking, its neighbours in
the program tile, the physical pages, or whether it came from a prefill or a decode step.

Two launch paths produce the same bits for every row:
  split: one program per (query block, KV head, segment) stores partials to a workspace, then a combine
         kernel folds each row's segments left to right (parallel over segments: decode speed);
  fused: one program per (query block, KV head) loops over its segments and folds in registers
         (no workspace: large prefills).
Both paths use the same segment code and the same fold expression, and both are compiled without
floating-point contraction (`enable_fp_fusion=False`), so no FMA is formed in one path and not the other.
The path is a deployment choice made once from static sizes (sub_launch.deployment_path); never from a batch.

No host<->device synchronisation happens here: grids come from tensor shapes (CUDA-graph safe).
"""

from __future__ import annotations

from typing import Literal

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, scalar, tensor, tensor_descriptor
from vosti_plugin.launch import guard
from vosti_plugin.ops import dependent_launch
from vosti_plugin.triton_mode import use_lane_invariant_interpreter
from vosti_plugin.attention.config import AttentionLaunchConfig, next_power_of_two

use_lane_invariant_interpreter()

# Scores are kept in log2 units: the host multiplies the score scale and the soft cap by log2(e), so the
# kernels exponentiate with exp2 (one fewer multiply per score than exp) and tanh sees the same argument.
LOG2E = 1.4426950408889634
# Sequences scanned per step when a program looks up which sequence it belongs to.
_SEQ_SCAN_CHUNK = 128
# Split launches run at most this many programs per query block and KV head, each visiting every SPLIT_SEGMENT_STRIDE-th
# segment: under CUDA graphs the grid spans max_model_len (256 segments at 128K), and programs with no key cost a
# decode step 1.5-2x its attention time at 1K (H200, session 30). Each segment's partial is the same code at the
# same workspace index whatever the stride, so the stride moves no bit.
SPLIT_SEGMENT_STRIDE = 32

LaunchPath = Literal["split", "fused"]


# Relational contracts, proved by `vosti verify` (vosti_plugin/verifier/) for every config of the catalog.
# A query row x of sequence sL (left launch) and a row y of sequence sR (right launch) at the same absolute
# position p, with equal q rows and equal logical K/V on the row's visible range [lo(p), p] (read through
# each side's own block table; lo(p) = max(0, p - window + 1) with a window, else 0), get bitwise equal
# outputs (fused path) or partials of every segment in [lo(p) // SEGMENT, p // SEGMENT] (split path).
# Free: number of sequences, other sequences' lengths and pages, query lengths, the row's place in its
# program tile; so this covers batch invariance, prefill vs decode, chunked prefill and page tables.
# Why: the row visits the tiles of each segment in increasing order from a fixed grid; a tile without any
# key in [lo(p), p] leaves (m, l, acc) unchanged by selection; per-row values of tl.dot depend only on the
# row's own operands; padded and out-of-range K/V loads read 0 and are masked to -inf / p = 0 before use.
_ATTENTION_TENSORS = {
    "q_ptr": tensor(("T", "HQ", "HEAD_DIM"), ("stride_qt", "stride_qh", 1)),
    "k_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_kb", "stride_kp", "stride_kh", 1)),
    "v_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_vb", "stride_vp", "stride_vh", 1)),
    # the same caches as [page, KV head, in-page position, dim] TMA descriptors (KV_TMA launches read K/V through them)
    "k_desc": tensor_descriptor(("NB", "HKV", "PAGE_SIZE", "HEAD_DIM"), ("stride_kb", "stride_kh", "stride_kp", 1),
                                ("1", "1", "BLOCK_N", "HEAD_DIM_PAD"), view_of="k_ptr", view_dims=(0, 2, 1, 3)),
    "v_desc": tensor_descriptor(("NB", "HKV", "PAGE_SIZE", "HEAD_DIM"), ("stride_vb", "stride_vh", "stride_vp", 1),
                                ("1", "1", "BLOCK_N", "HEAD_DIM_PAD"), view_of="v_ptr", view_dims=(0, 2, 1, 3)),
    "block_table_ptr": tensor(("S", "MB"), ("stride_bt", 1), "int32"),
    "seq_lens_ptr": tensor(("S",), (1,), "int32"),
    "query_start_loc_ptr": tensor(("S1",), (1,), "int32"),
    # an upper bound on every seq_lens entry of the launch (the step's longest sequence), on the device
    "max_seq_len_ptr": tensor(("ONE",), (1,), "int32"),
    "out_ptr": tensor(("T", "HQ", "HEAD_DIM"), ("stride_ot", "stride_oh", 1)),
    # the split path's fp32 workspace, indexed (token * num_q_heads + head) * num_segments + segment
    "part_m_ptr": tensor(("T", "HQ", "NSEG"), ("num_q_heads*num_segments", "num_segments", 1)),
    "part_l_ptr": tensor(("T", "HQ", "NSEG"), ("num_q_heads*num_segments", "num_segments", 1)),
    "part_acc_ptr": tensor(("T", "HQ", "NSEG", "HEAD_DIM"),
                           ("num_q_heads*num_segments*HEAD_DIM", "num_segments*HEAD_DIM", "HEAD_DIM", 1)),
    "scale": scalar("float32"),
    "soft_cap": scalar("float32"),
}
# launch {S}'s varlen metadata is well formed and its row {r} of sequence {s} sits at position p
_ROW_AT_P = (
    "0 <= {s} < {S}.num_seqs", "{S}.query_start_loc_ptr[0] == 0",
    "forall(i, 0 <= i <= {S}.num_seqs, forall(j, i <= j <= {S}.num_seqs, "
    "{S}.query_start_loc_ptr[i] <= {S}.query_start_loc_ptr[j]))",
    "{S}.query_start_loc_ptr[{S}.num_seqs] <= {S}.T",
    "{S}.query_start_loc_ptr[{s}] <= {r} < {S}.query_start_loc_ptr[{s} + 1]",
    "{S}.query_start_loc_ptr[{s} + 1] - {S}.query_start_loc_ptr[{s}] <= {S}.seq_lens_ptr[{s}]",
    "{S}.seq_lens_ptr[{s}] - ({S}.query_start_loc_ptr[{s} + 1] - {S}.query_start_loc_ptr[{s}]) + {r} "
    "- {S}.query_start_loc_ptr[{s}] == p",
)
_ROWS_AT_P = tuple(c.format(S="L", s="sL", r="x") for c in _ROW_AT_P) + tuple(
    c.format(S="R", s="sR", r="y") for c in _ROW_AT_P)
# head and in-page offsets are formed in int32 (tokens and pages are int64)
_INT32_OFFSETS = tuple(c.format(S=S) for S in "LR" for c in (
    "forall(i, 0 <= i < {S}.num_seqs, {S}.query_start_loc_ptr[i + 1] - {S}.query_start_loc_ptr[i] <= "
    "{S}.seq_lens_ptr[i] and {S}.seq_lens_ptr[i] < 1073741824)",
    "(HQ - 1) * {S}.stride_qh < 2147483648", "(HQ - 1) * {S}.stride_oh < 2147483648",
    "(PAGE_SIZE - 1) * {S}.stride_kp < 2147483648", "(HKV - 1) * {S}.stride_kh < 2147483648",
    "(PAGE_SIZE - 1) * {S}.stride_vp < 2147483648", "(HKV - 1) * {S}.stride_vh < 2147483648",
    "{S}.NSEG == {S}.num_segments",  # the split workspace holds num_segments partials per row and head
    # and so every segment of the launch's sequences (num_segments follows the longest sequence)
    "forall(i, 0 <= i < {S}.num_seqs, {S}.seq_lens_ptr[i] <= {S}.num_segments * {S}.SEGMENT)"))
_LO = "ite(USE_WINDOW, max(0, p - window + 1), 0)"
_KV_EQUAL = tuple(
    f"forall(j, {_LO} <= j <= p, L.{t}[L.block_table_ptr[sL, j // PAGE_SIZE], j % PAGE_SIZE, :, :] == "
    f"R.{t}[R.block_table_ptr[sR, j // PAGE_SIZE], j % PAGE_SIZE, :, :])" for t in ("k_ptr", "v_ptr"))
# the cache holds finite V for every valid key of the row's sequence: a masked probability (exactly 0) times a
# valid V row past p is 0; a V load past the sequence's keys reads another request's slot or garbage
# (possibly inf/NaN, and 0 * NaN = NaN), so the kernel masks it to 0
_V_FINITE = tuple(f"forall(j, 0 <= j < {S}.seq_lens_ptr[{s}], finite({S}.v_ptr[{S}.block_table_ptr[{s}, j // PAGE_SIZE], "
                  f"j % PAGE_SIZE, :, :]))" for S, s in (("L", "sL"), ("R", "sR")))
# every block-table entry of the row's sequence names a page of the cache (vLLM's tables hold page ids, 0 where a
# column is unused): a KV_TMA load of a page past the cache would read 0
_PAGES_IN_CACHE = tuple(f"forall(i, 0 <= i, 0 <= {S}.block_table_ptr[{s}, i] and {S}.block_table_ptr[{s}, i] < {S}.NB)"
                        for S, s in (("L", "sL"), ("R", "sR")))
_SAME_ROW = ("num_q_heads", "HQ", "HKV", "scale", "soft_cap", "window")
_MAX_SEQ_LEN_BOUNDS = tuple(f"{S}.seq_lens_ptr[{s}] <= {S}.max_seq_len_ptr[0]" for S, s in (("L", "sL"), ("R", "sR")))
_ROW_PRE = ("num_q_heads == HQ", "HQ == HKV * QUERIES_PER_KV", "window >= 1", "p >= 0") + _ROWS_AT_P + _V_FINITE \
    + _MAX_SEQ_LEN_BOUNDS
# the program and lane that own row {r} (coverage hint, checked): query block, KV head, row in the tile
_WRITER = {"pid0": "{S}.query_start_loc_ptr[{s}] // BLOCK_Q + {s} + ({r} - {S}.query_start_loc_ptr[{s}]) // BLOCK_Q",
           "pid1": "ite(HEAD_BLOCKS == 1, {h} // QUERIES_PER_KV, "
                   "({h} // QUERIES_PER_KV) * HEAD_BLOCKS + ({h} % QUERIES_PER_KV) // GROUP)",
           "lane0": "(({r} - {S}.query_start_loc_ptr[{s}]) % BLOCK_Q) * GROUP"
                    " + ite(HEAD_BLOCKS == 1, {h} % QUERIES_PER_KV, ({h} % QUERIES_PER_KV) % GROUP)"}
_SEGMENT_PARTIALS_EQUAL = tuple(
    f"forall(h, 0 <= h < HQ, forall(g, ({_LO}) // SEGMENT <= g <= p // SEGMENT, {c}))" for c in (
        "L.part_m_ptr[x, h, g] == R.part_m_ptr[y, h, g]", "L.part_l_ptr[x, h, g] == R.part_l_ptr[y, h, g]",
        "L.part_acc_ptr[x, h, g, :] == R.part_acc_ptr[y, h, g, :]"))


@triton.jit
def _tile_scores(q, k, scale, soft_cap, USE_SOFT_CAP: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """q times a KV tile's keys, scaled (log2 units), soft-capped where the model caps scores."""
    scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
    if USE_SOFT_CAP:
        capped = scores / soft_cap
        decay = tl.exp(-2.0 * tl.abs(capped))
        magnitude = (1.0 - decay) / (1.0 + decay)
        scores = soft_cap * tl.where(capped < 0.0, -magnitude, magnitude)
    return scores


@triton.jit
def _online_softmax_step(scores, v, m_i, l_i, acc, DOT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr,
                         ROW_SUMS_BY_DOT: tl.constexpr):
    """(m, l, acc) after one tile of scores and values; a row whose scores are all -inf keeps m = -inf, p = 0.
    ROW_SUMS_BY_DOT: l sums the row's probabilities as the values' dot reads them (16-bit on a GPU), by an MMA
    against columns of ones, whose order follows the instruction, where tl.sum's follows the tile's layout."""
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    m_dead = m_new == float("-inf")
    alpha = tl.where(m_dead, 1.0, tl.exp2(m_i - m_new))
    p = tl.where(m_dead[:, None], 0.0, tl.exp2(scores - m_new[:, None]))
    if ROW_SUMS_BY_DOT:
        ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(v.dtype)
        l_new = l_i * alpha + tl.max(tl.dot(p.to(v.dtype), ones, input_precision=DOT_PRECISION), axis=1)
    else:
        l_new = l_i * alpha + tl.sum(p, axis=1)
    acc_new = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l_new, acc_new


_FUSED_WITNESS = {S: {**{k: v.format(S=S, s=s, r=r, h="e1") for k, v in _WRITER.items()}, "pid2": "0"}
                  for S, s, r in (("L", "sL", "x"), ("R", "sR", "y"))}
_SPLIT_WITNESS = {S: {**{k: v.format(S=S, s=s, r=r, h="h") for k, v in _WRITER.items()}, "pid2": "g % SEGMENT_STRIDE",
                      "seg": "g"}
                  for S, s, r in (("L", "sL", "x"), ("R", "sR", "y"))}
_ROW_INPUTS_EQUAL = _ROW_PRE + ("L.q_ptr[x, :, :] == R.q_ptr[y, :, :]",) + _KV_EQUAL + _PAGES_IN_CACHE
_SEGMENTS_ON_GRID = ("p // SEGMENT < L.num_segments", "p // SEGMENT < R.num_segments")
_OUT_EQUAL = ("L.out_ptr[x, :, :] == R.out_ptr[y, :, :]",)
# the right launch reads, at row y's partial of segment g, what the left launch stored at row x's
_FED_PARTIALS = tuple(
    f"forall(h, 0 <= h < HQ, forall(g, ({_LO}) // SEGMENT <= g <= p // SEGMENT, {c}))" for c in (
        "fed(L.part_m_ptr[x, h, g], R.part_m_ptr[y, h, g])", "fed(L.part_l_ptr[x, h, g], R.part_l_ptr[y, h, g])",
        "forall(d, 0 <= d < HEAD_DIM, fed(L.part_acc_ptr[x, h, g, d], R.part_acc_ptr[y, h, g, d]))"))


# Three launch modes: split (FUSED off: a program per segment stores its partial), fused (a program folds its
# segments in registers) and FOLD (fused with each segment's partial loaded from the split launches' workspace
# instead of computed: the split path's combine where a deployment runs both paths). PROBE (verification only, never
# launched) makes a fused launch also store its partials; the chain of goals below then gives "a fused row equals the
# FOLD of the split partials of the same row" across tile heights, which lets one deployment run prefill steps fused
# in taller tiles and decode steps split: fused(x) = fused+PROBE(x) = FOLD(probe partials of x) = FOLD(split partials).
# A FOLD program may take fewer of a KV head's query heads than the others (HEAD_BLOCKS programs a KV head).
@contract(
    params=_ATTENTION_TENSORS,
    grid=("T // BLOCK_Q + num_seqs", "HKV * HEAD_BLOCKS", "ite(FUSED, 1, min(num_segments, SEGMENT_STRIDE))"),
    verif=[
        goal("causal_row_invariance", when="FUSED and not FOLD", same=_SAME_ROW, pre=_ROW_INPUTS_EQUAL,
             post=_OUT_EQUAL, witness=_FUSED_WITNESS),
        goal("causal_segment_partials", when="not FUSED", same=_SAME_ROW, across=("BLOCK_Q", "BLOCK_M"),
             pre=_ROW_INPUTS_EQUAL + _SEGMENTS_ON_GRID, post=_SEGMENT_PARTIALS_EQUAL, witness=_SPLIT_WITNESS),
        goal("fold_invariance", when="FOLD", same=_SAME_ROW, pre=_ROW_PRE + _SEGMENTS_ON_GRID + _SEGMENT_PARTIALS_EQUAL,
             post=_OUT_EQUAL, witness=_FUSED_WITNESS),
        goal("probe_free", when="PROBE", right_when="FUSED and not PROBE and not FOLD", same=_SAME_ROW,
             across=("PROBE",), pre=_ROW_INPUTS_EQUAL, post=_OUT_EQUAL, witness=_FUSED_WITNESS),
        goal("probe_equals_split", when="PROBE", right_when="not FUSED", same=_SAME_ROW,
             across=("FUSED", "PROBE", "BLOCK_Q", "BLOCK_M", "SEGMENT_STRIDE", "KV_TMA"),
             pre=_ROW_INPUTS_EQUAL + _SEGMENTS_ON_GRID,
             post=_SEGMENT_PARTIALS_EQUAL, witness={**_SPLIT_WITNESS, "L": {**_SPLIT_WITNESS["L"], "pid2": "0"}}),
        goal("fused_equals_fold", when="PROBE", right_when="FOLD", same=_SAME_ROW,
             across=("PROBE", "FOLD", "BLOCK_Q", "BLOCK_M", "GROUP", "HEAD_BLOCKS", "KV_TMA"),
             pre=_ROW_INPUTS_EQUAL + _FED_PARTIALS, post=_OUT_EQUAL, witness=_FUSED_WITNESS),
    ],
    symbolic=("HEAD_DIM", "HEAD_DIM_PAD", "PAGE_SIZE", "QUERIES_PER_KV", "BLOCK_N", "USE_SOFT_CAP", "USE_WINDOW"),
    bounds=_INT32_OFFSETS,
    assume=("HEAD_DIM >= 1", "HEAD_DIM_PAD >= HEAD_DIM", "PAGE_SIZE >= 1", "QUERIES_PER_KV >= 1",
            "QUERIES_PER_KV <= GROUP * HEAD_BLOCKS", "HEAD_BLOCKS >= 1", "BLOCK_Q >= 1", "BLOCK_M == BLOCK_Q * GROUP",
            "BLOCK_N >= 1",
            "SEGMENT % BLOCK_N == 0",
            # KV_TMA launches read a tile by one descriptor load: a tile lies in one page
            "not KV_TMA or PAGE_SIZE % BLOCK_N == 0"),
)
# num_seqs is the step's batch and num_segments follows an eager step's longest sequence (VOSTI_EAGER_STEP_GRID):
# one compiled kernel for every value. Specialized, a batch of 1 or a multiple of 16 would compile its own kernel
# the first time a step has it, after the engine's warm-up (a latency spike while serving).
@triton.jit(do_not_specialize=["num_seqs", "num_segments"])
def _paged_attention_segments_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    k_desc,
    v_desc,
    block_table_ptr,
    seq_lens_ptr,
    query_start_loc_ptr,
    max_seq_len_ptr,
    out_ptr,
    part_m_ptr,
    part_l_ptr,
    part_acc_ptr,
    num_seqs,
    num_q_heads,
    num_segments,
    scale,
    soft_cap,
    window,
    stride_qt,
    stride_qh,
    stride_kb,
    stride_kp,
    stride_kh,
    stride_vb,
    stride_vp,
    stride_vh,
    stride_bt,
    stride_ot,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    QUERIES_PER_KV: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_BLOCKS: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SEGMENT: tl.constexpr,
    SEGMENT_STRIDE: tl.constexpr,
    SEQ_SCAN_CHUNK: tl.constexpr,
    USE_WINDOW: tl.constexpr,
    USE_SOFT_CAP: tl.constexpr,
    FUSED: tl.constexpr,
    FOLD: tl.constexpr,
    PROBE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    ROW_SUMS_BY_DOT: tl.constexpr,
    KV_TMA: tl.constexpr = False,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    q_block = tl.program_id(0)
    kv_head = tl.program_id(1)
    if HEAD_BLOCKS > 1:   # axis 1: KV heads, each in HEAD_BLOCKS programs of GROUP query heads
        kv_head = tl.program_id(1) // HEAD_BLOCKS
    if not FUSED:
        # The grid spans min(num_segments, SEGMENT_STRIDE) programs per block and head; num_segments follows
        # max_model_len under CUDA graphs. A program whose first segment starts past the step's longest sequence
        # holds no key of any row: exit before the sequence lookup.
        if tl.program_id(2) * SEGMENT >= tl.load(max_seq_len_ptr):
            return

    # Sequence s owns query blocks [query_start_loc[s] // BLOCK_Q + s, ...): count the owners that start
    # at or before this block. Blocks falling in the gaps between sequences exit below.
    seq_count = 0
    for chunk in range(0, num_seqs, SEQ_SCAN_CHUNK):
        seq_ids = chunk + tl.arange(0, SEQ_SCAN_CHUNK)
        in_range = seq_ids < num_seqs
        starts = tl.load(query_start_loc_ptr + seq_ids, mask=in_range, other=0)
        owns = in_range & (starts // BLOCK_Q + seq_ids <= q_block)
        seq_count += tl.sum(owns.to(tl.int32), axis=0)
    seq = seq_count - 1

    q_start = tl.load(query_start_loc_ptr + seq)
    q_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    first_local_token = (q_block - (q_start // BLOCK_Q + seq)) * BLOCK_Q
    if first_local_token >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    context_len = seq_len - q_len

    rows = tl.arange(0, BLOCK_M)
    local_token = first_local_token + rows // GROUP
    head_in_group = rows % GROUP
    if HEAD_BLOCKS > 1:
        head_in_group += tl.program_id(1) % HEAD_BLOCKS * GROUP
    q_head = kv_head * QUERIES_PER_KV + head_in_group
    row_valid = (local_token < q_len) & (head_in_group < QUERIES_PER_KV)
    token = (q_start + local_token).to(tl.int64)
    row_pos = tl.where(row_valid, context_len + local_token, -1)
    if USE_WINDOW:
        row_lo = tl.maximum(row_pos - window + 1, 0)
    else:
        row_lo = tl.zeros([BLOCK_M], dtype=tl.int32)

    last_pos = context_len + tl.minimum(first_local_token + BLOCK_Q, q_len) - 1
    if USE_WINDOW:
        first_key = tl.maximum(context_len + first_local_token - window + 1, 0)
    else:
        first_key = 0

    TILES_PER_SEGMENT: tl.constexpr = SEGMENT // BLOCK_N
    # Program z visits segments z, z + SEGMENT_STRIDE, ... (fused launches: z = 0, stride 1), from the first of them
    # that holds a key of the block's first window to the block's last row.
    seg_lag = tl.maximum(first_key // SEGMENT - tl.program_id(2), 0)
    seg_begin = tl.program_id(2) + (seg_lag + SEGMENT_STRIDE - 1) // SEGMENT_STRIDE * SEGMENT_STRIDE
    seg_end = last_pos // SEGMENT + 1
    # A split program whose segments all lie past the block's last row: no work.
    if seg_begin >= seg_end:
        return

    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    if not FOLD:
        q = tl.load(
            q_ptr + token[:, None] * stride_qt + q_head[:, None] * stride_qh + dims[None, :],
            mask=row_valid[:, None] & dim_ok[None, :],
            other=0.0,
        )

    run_m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    run_l = tl.zeros([BLOCK_M], dtype=tl.float32)
    run_acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    block_table_row = block_table_ptr + seq.to(tl.int64) * stride_bt

    for seg in range(seg_begin, seg_end, SEGMENT_STRIDE):
        part = (token * num_q_heads + q_head) * num_segments + seg
        if FOLD:
            # the split launches' partials of this segment, folded below as the fused path folds its own
            m_i = tl.load(part_m_ptr + part, mask=row_valid, other=float("-inf"))
            l_i = tl.load(part_l_ptr + part, mask=row_valid, other=0.0)
            acc = tl.load(part_acc_ptr + part[:, None] * HEAD_DIM + dims[None, :],
                          mask=row_valid[:, None] & dim_ok[None, :], other=0.0)
        else:
            m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
            l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
            acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
            tile_begin = tl.maximum(seg * TILES_PER_SEGMENT, first_key // BLOCK_N)
            tile_end = tl.maximum(tl.minimum((seg + 1) * TILES_PER_SEGMENT, last_pos // BLOCK_N + 1), tile_begin)
            # Tiles [tile_begin, whole_end) hold only keys every valid row of the block sees (at or before its first
            # row; none with a window): they skip the selects. The two loops visit the tiles of one range in order
            # (the verifier reads them as one loop: obligation loop-concat).
            if USE_WINDOW:
                whole_end = tile_begin
            else:
                whole_end = tl.minimum(tl.maximum((context_len + first_local_token + 1) // BLOCK_N, tile_begin),
                                       tile_end)
            for tile in range(tile_begin, whole_end):
                if KV_TMA:   # the tile's page, then its rows of this KV head by one load each (0 past HEAD_DIM)
                    page = tl.load(block_table_row + tile * BLOCK_N // PAGE_SIZE)
                    k = k_desc.load([page, kv_head, tile * BLOCK_N % PAGE_SIZE, 0]).reshape(BLOCK_N, HEAD_DIM_PAD)
                    v = v_desc.load([page, kv_head, tile * BLOCK_N % PAGE_SIZE, 0]).reshape(BLOCK_N, HEAD_DIM_PAD)
                else:
                    key_pos = tile * BLOCK_N + tl.arange(0, BLOCK_N)
                    page = tl.load(block_table_row + key_pos // PAGE_SIZE).to(tl.int64)
                    in_page = key_pos % PAGE_SIZE
                    k_offsets = page * stride_kb + in_page * stride_kp + kv_head * stride_kh
                    v_offsets = page * stride_vb + in_page * stride_vp + kv_head * stride_vh
                    k = tl.load(k_ptr + k_offsets[:, None] + dims[None, :], mask=dim_ok[None, :], other=0.0)
                    v = tl.load(v_ptr + v_offsets[:, None] + dims[None, :], mask=dim_ok[None, :], other=0.0)
                scores = _tile_scores(q, k, scale, soft_cap, USE_SOFT_CAP, DOT_PRECISION)
                m_i, l_i, acc = _online_softmax_step(scores, v, m_i, l_i, acc, DOT_PRECISION, BLOCK_N, ROW_SUMS_BY_DOT)
            for tile in range(whole_end, tile_end):
                key_pos = tile * BLOCK_N + tl.arange(0, BLOCK_N)
                key_valid = key_pos <= last_pos
                if KV_TMA:   # the tile's first key is valid; V past the block's last row as 0 (0 * NaN is NaN)
                    page = tl.load(block_table_row + tile * BLOCK_N // PAGE_SIZE)
                    k = k_desc.load([page, kv_head, tile * BLOCK_N % PAGE_SIZE, 0]).reshape(BLOCK_N, HEAD_DIM_PAD)
                    v = tl.where(key_valid[:, None], v_desc.load([page, kv_head, tile * BLOCK_N % PAGE_SIZE, 0])
                                 .reshape(BLOCK_N, HEAD_DIM_PAD), 0.0)
                else:
                    page = tl.load(block_table_row + key_pos // PAGE_SIZE, mask=key_valid, other=0).to(tl.int64)
                    in_page = key_pos % PAGE_SIZE
                    k_offsets = page * stride_kb + in_page * stride_kp + kv_head * stride_kh
                    v_offsets = page * stride_vb + in_page * stride_vp + kv_head * stride_vh
                    k = tl.load(k_ptr + k_offsets[:, None] + dims[None, :], mask=key_valid[:, None] & dim_ok[None, :],
                                other=0.0)
                    v = tl.load(v_ptr + v_offsets[:, None] + dims[None, :], mask=key_valid[:, None] & dim_ok[None, :],
                                other=0.0)

                scores = _tile_scores(q, k, scale, soft_cap, USE_SOFT_CAP, DOT_PRECISION)
                allowed = (key_pos[None, :] <= row_pos[:, None]) & (key_pos[None, :] >= row_lo[:, None])
                scores = tl.where(allowed, scores, float("-inf"))
                tile_live = (tile * BLOCK_N <= row_pos) & (tile * BLOCK_N + BLOCK_N > row_lo)

                m_new, l_new, acc_new = _online_softmax_step(scores, v, m_i, l_i, acc, DOT_PRECISION, BLOCK_N,
                                                             ROW_SUMS_BY_DOT)
                m_i = tl.where(tile_live, m_new, m_i)
                l_i = tl.where(tile_live, l_new, l_i)
                acc = tl.where(tile_live[:, None], acc_new, acc)

        if PROBE or not FUSED:
            tl.store(part_m_ptr + part, m_i, mask=row_valid)
            tl.store(part_l_ptr + part, l_i, mask=row_valid)
            tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + dims[None, :], acc,
                     mask=row_valid[:, None] & dim_ok[None, :])
        if FUSED:
            # The fold below is the same expression as in _combine_segments_kernel.
            seg_live = row_valid & (seg >= row_lo // SEGMENT) & (seg <= row_pos // SEGMENT)
            fold_m = tl.maximum(run_m, m_i)
            fold_dead = fold_m == float("-inf")
            run_scale = tl.where(fold_dead, 1.0, tl.exp2(run_m - fold_m))
            seg_scale = tl.where(fold_dead, 0.0, tl.exp2(m_i - fold_m))
            fold_l = run_l * run_scale + l_i * seg_scale
            fold_acc = run_acc * run_scale[:, None] + acc * seg_scale[:, None]
            run_m = tl.where(seg_live, fold_m, run_m)
            run_l = tl.where(seg_live, fold_l, run_l)
            run_acc = tl.where(seg_live[:, None], fold_acc, run_acc)

    if FUSED:
        result = run_acc / run_l[:, None]
        tl.store(
            out_ptr + token[:, None] * stride_ot + q_head[:, None] * stride_oh + dims[None, :],
            result.to(out_ptr.dtype.element_ty),
            mask=row_valid[:, None] & dim_ok[None, :],
        )


# Relational contract: the fold of a row's segment partials.  Rows x (left) and y (right) at the same
# position p whose partials of every segment in [lo(p) // SEGMENT, p // SEGMENT] are bitwise equal get
# bitwise equal outputs; the fold visits exactly those segments, left to right, with the fold expression
# of the fused path, so out also equals the fused path's row.  Rows past query_start_loc[S] get zeros.
@contract(
    params={n: _ATTENTION_TENSORS[n] for n in ("out_ptr", "part_m_ptr", "part_l_ptr", "part_acc_ptr",
                                                "seq_lens_ptr", "query_start_loc_ptr")},
    grid=("T", "HQ"),
    verif=[goal("segment_fold_invariance", same=("num_q_heads", "HQ", "window"),
                pre=("num_q_heads == HQ", "window >= 1", "p >= 0") + _ROWS_AT_P + _SEGMENT_PARTIALS_EQUAL,
                post=("L.out_ptr[x, :, :] == R.out_ptr[y, :, :]",),
                witness={"L": {"pid0": "x", "pid1": "e1"}, "R": {"pid0": "y", "pid1": "e1"}})],
    symbolic=("HEAD_DIM", "HEAD_DIM_PAD"),
    assume=("HEAD_DIM >= 1", "HEAD_DIM_PAD >= HEAD_DIM"),
    bounds=tuple(f"(HQ - 1) * {S}.stride_oh < 2147483648" for S in "LR"),
)
@triton.jit(do_not_specialize=["num_seqs", "num_segments"])  # as the segments kernel's
def _combine_segments_kernel(
    out_ptr,
    part_m_ptr,
    part_l_ptr,
    part_acc_ptr,
    seq_lens_ptr,
    query_start_loc_ptr,
    num_seqs,
    num_q_heads,
    num_segments,
    window,
    stride_ot,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    SEGMENT: tl.constexpr,
    SEQ_SCAN_CHUNK: tl.constexpr,
    USE_WINDOW: tl.constexpr,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    token = tl.program_id(0)
    q_head = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    out_row = out_ptr + token.to(tl.int64) * stride_ot + q_head * stride_oh + dims

    # The row belongs to the number of sequences that end at or before it.
    seq = 0
    for chunk in range(0, num_seqs, SEQ_SCAN_CHUNK):
        seq_ids = chunk + tl.arange(0, SEQ_SCAN_CHUNK)
        in_range = seq_ids < num_seqs
        ends = tl.load(query_start_loc_ptr + seq_ids + 1, mask=in_range, other=0)
        seq += tl.sum((in_range & (ends <= token)).to(tl.int32), axis=0)
    if seq >= num_seqs:
        tl.store(out_row, tl.zeros([HEAD_DIM_PAD], dtype=tl.float32).to(out_ptr.dtype.element_ty), mask=dim_ok)
        return

    q_start = tl.load(query_start_loc_ptr + seq)
    q_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    pos = tl.load(seq_lens_ptr + seq) - q_len + (token - q_start)
    if USE_WINDOW:
        lo = tl.maximum(pos - window + 1, 0)
    else:
        lo = 0

    run_m = tl.full([1], float("-inf"), dtype=tl.float32)
    run_l = tl.zeros([1], dtype=tl.float32)
    run_acc = tl.zeros([1, HEAD_DIM_PAD], dtype=tl.float32)
    part_row = (token.to(tl.int64) * num_q_heads + q_head) * num_segments
    for seg in range(lo // SEGMENT, pos // SEGMENT + 1):
        m_i = tl.load(part_m_ptr + part_row + seg + tl.zeros([1], dtype=tl.int32))
        l_i = tl.load(part_l_ptr + part_row + seg + tl.zeros([1], dtype=tl.int32))
        acc = tl.load(part_acc_ptr + (part_row + seg) * HEAD_DIM + dims[None, :], mask=dim_ok[None, :], other=0.0)
        # Same fold expression as the FUSED branch of _paged_attention_segments_kernel.
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
    tl.store(out_row[None, :], result.to(out_ptr.dtype.element_ty), mask=dim_ok[None, :])


def num_kv_segments(block_table: torch.Tensor, page_size: int, segment: int, max_seqlen_k: int | None) -> int:
    """Segments on the grid: enough for the widest block table row (or the caller's bound)."""
    max_kv = block_table.shape[1] * page_size
    if max_seqlen_k is not None:
        max_kv = min(max_kv, int(max_seqlen_k))
    return max(1, triton.cdiv(max_kv, segment))


def step_max_seq_len(seq_lens: torch.Tensor) -> torch.Tensor:
    """The longest sequence of a step as a one-element int32 tensor on the device (no host sync)."""
    if seq_lens.numel() == 0:
        return torch.zeros(1, dtype=torch.int32, device=seq_lens.device)
    return seq_lens.max().reshape(1).to(torch.int32)


def _part_stride(rows: int) -> int:
    """Elements from m's start to l's and from l's to acc's in the workspace: `rows` rounded up to 16 bytes. Triton
    compiles a kernel per pointer divisibility by 16, so partials placed right after an odd number of rows would
    compile another kernel the first time a step had one, while serving."""
    return -(-rows // 4) * 4


def split_workspace_numel(num_tokens: int, num_q_heads: int, head_dim: int, num_segments: int) -> int:
    """fp32 elements the split path needs: m and l per (row, segment) plus acc per (row, segment, dim)."""
    rows = num_tokens * num_q_heads * num_segments
    return 2 * _part_stride(rows) + rows * head_dim


def _check_inputs(q, k_cache, v_cache, block_table, seq_lens, query_start_loc, out, config) -> None:
    if q.dim() != 3 or out.shape != q.shape:
        raise ValueError(f"q must be [tokens, q_heads, head_dim] and out the same shape; got {q.shape}, {out.shape}")
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(
            f"k_cache/v_cache must be [blocks, page_size, kv_heads, head_dim]; got {k_cache.shape}, {v_cache.shape}"
        )
    if k_cache.shape[3] != q.shape[2]:
        raise ValueError(f"head_dim mismatch: q {q.shape[2]}, cache {k_cache.shape[3]}")
    if q.dtype != k_cache.dtype or v_cache.dtype != k_cache.dtype:
        raise ValueError(f"q, k_cache and v_cache must share a dtype; got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    for name, tensor in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in head_dim (stride {tensor.stride(-1)})")
    for name, tensor in (("block_table", block_table), ("seq_lens", seq_lens), ("query_start_loc", query_start_loc)):
        if tensor.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {tensor.dtype}")
    if block_table.dim() != 2 or block_table.stride(1) != 1:
        raise ValueError("block_table must be [seqs, max_blocks] with contiguous rows")
    if seq_lens.dim() != 1 or query_start_loc.shape != (seq_lens.shape[0] + 1,):
        raise ValueError(f"query_start_loc must be [seqs + 1]; got {query_start_loc.shape} for {seq_lens.shape[0]} seqs")
    if block_table.shape[0] < seq_lens.shape[0]:
        raise ValueError(f"block_table has {block_table.shape[0]} rows for {seq_lens.shape[0]} seqs")
    num_q_heads, num_kv_heads = q.shape[1], k_cache.shape[2]
    if num_q_heads != num_kv_heads * config.queries_per_kv:
        raise ValueError(
            f"config is for {config.queries_per_kv} queries per KV head; got {num_q_heads} q / {num_kv_heads} kv heads"
        )


def _kv_descriptors(k_cache: torch.Tensor, v_cache: torch.Tensor, block_n: int):
    """TMA descriptors of the caches as [page, KV head, in-page position, dim], loaded a KV tile of one head at a time
    (on GPUs without TMA, below sm90, Triton rewrites descriptor loads to pointer loads); None where a descriptor
    cannot read them (16-byte alignment)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    width = next_power_of_two(k_cache.shape[3])
    out = []
    for cache in (k_cache, v_cache):
        blocks, page, heads, dim = cache.shape
        strides = [cache.stride(0), cache.stride(2), cache.stride(1), 1]
        if cache.data_ptr() % 16 or any(st * cache.element_size() % 16 for st in strides[:-1]):
            return None
        out.append(TensorDescriptor(cache, [blocks, heads, page, dim], strides, [1, 1, block_n, width]))
    return out


def _launch_segments(q, k_cache, v_cache, block_table, seq_lens, query_start_loc, max_seq_len, out, part_m, part_l,
                     part_acc, num_segments: int, scale: float, soft_cap: float | None, sliding_window: int | None, *,
                     config: AttentionLaunchConfig, fused: bool, fold: bool, segment_stride: int) -> None:
    """One launch of the segments kernel: split (partials to the workspace), fused, or FOLD (fused on the
    workspace's partials instead of the tiles)."""
    num_tokens, num_q_heads, head_dim = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    num_seqs = seq_lens.shape[0]
    use_window = sliding_window is not None and sliding_window > 0
    use_soft_cap = soft_cap is not None and soft_cap > 0
    stride = 1 if fused else segment_stride
    grid = (num_tokens // config.block_q + num_seqs, num_kv_heads * config.head_blocks,
            1 if fused else min(num_segments, stride))
    pdl = dependent_launch.enabled(out)
    descriptors = _kv_descriptors(k_cache, v_cache, config.block_n) if config.kv_tma and not fold else None
    if config.kv_tma and not fold and (descriptors is None or page_size % config.block_n):
        raise ValueError(f"config reads K/V tiles of {config.block_n} positions by TMA descriptor: the caches must be "
                         f"16-byte aligned in pages of a multiple of {config.block_n} positions; got pages of "
                         f"{page_size} (config.prefill_config picks TMA only where the page is the tile)")
    k_desc, v_desc = descriptors or (k_cache, v_cache)
    guard.check(_paged_attention_segments_kernel, grid, HEAD_DIM=head_dim,
                HEAD_DIM_PAD=next_power_of_two(head_dim), PAGE_SIZE=page_size, QUERIES_PER_KV=config.queries_per_kv,
                GROUP=config.group, HEAD_BLOCKS=config.head_blocks, BLOCK_Q=config.block_q, BLOCK_M=config.block_m,
                BLOCK_N=config.block_n,
                SEGMENT=config.segment, SEGMENT_STRIDE=stride, SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK, USE_WINDOW=use_window,
                USE_SOFT_CAP=use_soft_cap, FUSED=fused, FOLD=fold, PROBE=False,
                DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32", ROW_SUMS_BY_DOT=config.row_sums_by_dot,
                KV_TMA=descriptors is not None)
    _paged_attention_segments_kernel[grid](
        q, k_cache, v_cache, k_desc, v_desc, block_table, seq_lens, query_start_loc, max_seq_len, out, part_m, part_l,
        part_acc,
        num_seqs, num_q_heads, num_segments,
        float(scale) * LOG2E, float(soft_cap) * LOG2E if use_soft_cap else 1.0, int(sliding_window) if use_window else 0,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        out.stride(0), out.stride(1),
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=next_power_of_two(head_dim),
        PAGE_SIZE=page_size,
        QUERIES_PER_KV=config.queries_per_kv,
        GROUP=config.group,
        HEAD_BLOCKS=config.head_blocks,
        BLOCK_Q=config.block_q,
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        SEGMENT=config.segment,
        SEGMENT_STRIDE=stride,
        SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK,
        USE_WINDOW=use_window,
        USE_SOFT_CAP=use_soft_cap,
        FUSED=fused,
        FOLD=fold,
        PROBE=False,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        ROW_SUMS_BY_DOT=config.row_sums_by_dot,
        KV_TMA=descriptors is not None,
        PDL=pdl,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        enable_fp_fusion=False,
        launch_pdl=pdl,
    )


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    out: torch.Tensor,
    *,
    scale: float,
    config: AttentionLaunchConfig,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    max_seqlen_k: int | None = None,
    workspace: torch.Tensor | None = None,
    path: LaunchPath = "split",
    max_seq_len: torch.Tensor | None = None,
    fold: AttentionLaunchConfig | None = None,
    segment_stride: int = SPLIT_SEGMENT_STRIDE,
) -> torch.Tensor:
    """Causal attention of every query row over its sequence's paged K/V; writes `out` and returns it.

    q: [tokens, q_heads, head_dim]; k_cache, v_cache: [blocks, page_size, kv_heads, head_dim] (strided views
    allowed); block_table: [seqs, max_blocks] int32; seq_lens: [seqs] int32 (KV length incl. new tokens);
    query_start_loc: [seqs + 1] int32. Token i of sequence s sits at position seq_lens[s] - q_len_s + i.
    Rows past query_start_loc[-1] are padding: never read as tokens, their output is zero (split path with the
    combine kernel) or left as is (fused path, FOLD combine).

    sliding_window w: the row at position p attends to keys [max(0, p - w + 1), p]. soft_cap c: scores
    become c * tanh(score / c) (after `scale`). max_seqlen_k: optional host upper bound on seq_lens, only
    used to size the segment grid. workspace: optional flat fp32 tensor of at least
    `split_workspace_numel(...)` elements for the split path. path: "split" or "fused", chosen once per
    deployment by `sub_launch.deployment_path` (both give the same bits; the verifier proves each path separately).
    max_seq_len: optional one-element int32 tensor on q's device holding a bound >= every seq_lens entry (a
    step's longest sequence, reduced once per step and shared by its layers); reduced from seq_lens if None.
    Split programs of segments past it exit first.
    fold: the split path's combine as a FOLD launch of the segments kernel in these tiles (config.fold_config),
    which folds as fused launches do, so a deployment may run both paths (prefill_config's fused launches, split
    decode); None: the combine kernel.
    segment_stride: split programs per query block and KV head at most (each takes every segment_stride-th
    segment); only SPLIT_SEGMENT_STRIDE is proved (other values: timing variants, outside a served engine).
    """
    _check_inputs(q, k_cache, v_cache, block_table, seq_lens, query_start_loc, out, config)
    num_tokens, num_q_heads, head_dim = q.shape
    page_size = k_cache.shape[1]
    num_seqs = seq_lens.shape[0]
    if num_tokens == 0 or num_seqs == 0:
        return out
    use_window = sliding_window is not None and sliding_window > 0
    num_segments = num_kv_segments(block_table, page_size, config.segment, max_seqlen_k)
    needed = split_workspace_numel(num_tokens, num_q_heads, head_dim, num_segments)

    if path not in ("split", "fused"):
        raise ValueError(f"path must be 'split' or 'fused', got {path!r}")
    if fold is not None and (fold.segment, fold.queries_per_kv) != (config.segment, config.queries_per_kv):
        raise ValueError(f"the FOLD config must fold the config's segments and heads (config.fold_config); got "
                         f"segment {fold.segment} / {fold.queries_per_kv} queries per KV head for {config.segment} / "
                         f"{config.queries_per_kv}")
    fused = path == "fused"
    if fused:
        part_m = part_l = part_acc = out  # unused by the fused kernel
    else:
        if workspace is None:
            workspace = torch.empty(needed, dtype=torch.float32, device=q.device)
        elif workspace.dtype != torch.float32 or workspace.numel() < needed or not workspace.is_contiguous():
            raise ValueError(f"workspace must be a contiguous fp32 tensor of >= {needed} elements")
        rows = num_tokens * num_q_heads * num_segments
        stride = _part_stride(rows)
        part_m = workspace[:rows]
        part_l = workspace[stride : stride + rows]
        part_acc = workspace[2 * stride : needed]

    if max_seq_len is None:
        max_seq_len = step_max_seq_len(seq_lens)
    elif max_seq_len.shape != (1,) or max_seq_len.dtype != torch.int32 or max_seq_len.device != seq_lens.device:
        raise ValueError(f"max_seq_len must be a one-element int32 tensor on {seq_lens.device}; got "
                         f"{tuple(max_seq_len.shape)} {max_seq_len.dtype} on {max_seq_len.device}")
    args = (q, k_cache, v_cache, block_table, seq_lens, query_start_loc, max_seq_len, out, part_m, part_l, part_acc,
            num_segments, scale, soft_cap, sliding_window)
    _launch_segments(*args, config=config, fused=fused, fold=False, segment_stride=segment_stride)
    if not fused and fold is not None:   # the combine as a FOLD launch: the same fold as fused launches make
        _launch_segments(*args, config=fold, fused=True, fold=True, segment_stride=segment_stride)
        return out
    if not fused:
        pdl = dependent_launch.enabled(out)
        guard.check(_combine_segments_kernel, (num_tokens, num_q_heads), HEAD_DIM=head_dim,
                    HEAD_DIM_PAD=next_power_of_two(head_dim), SEGMENT=config.segment,
                    SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK, USE_WINDOW=use_window)
        _combine_segments_kernel[(num_tokens, num_q_heads)](
            out, part_m, part_l, part_acc, seq_lens, query_start_loc,
            num_seqs, num_q_heads, num_segments,
            int(sliding_window) if use_window else 0,
            out.stride(0), out.stride(1),
            HEAD_DIM=head_dim,
            HEAD_DIM_PAD=next_power_of_two(head_dim),
            SEGMENT=config.segment,
            SEQ_SCAN_CHUNK=_SEQ_SCAN_CHUNK,
            USE_WINDOW=use_window,
            PDL=pdl,
            num_warps=1,
            num_stages=1,
            enable_fp_fusion=False,
            launch_pdl=pdl,
        )
    return out


def _launch_mode(c: dict, fused: bool) -> dict:
    """Constexprs c as a fused or a split launch passes them."""
    return {**c, "FUSED": fused, "SEGMENT_STRIDE": 1 if fused else SPLIT_SEGMENT_STRIDE}


def _both_paths(key, cfg: AttentionLaunchConfig, split_base: dict, constexprs, both: dict, cross: dict) -> None:
    """A deployment that runs prefill steps fused (config.prefill_config) and decode steps split with a FOLD combine
    (config.fold_config): both launches, and the chain of pairs that proves a fused row equal to the FOLD of the
    split partials of that row (verification-only PROBE launches on the left; the rows go to the fused launch)."""
    import dataclasses

    from vosti_plugin.attention.config import fold_config, prefill_config

    flags = {n: split_base[n] for n in ("USE_SOFT_CAP", "USE_WINDOW")}
    prefill, fold = prefill_config(cfg, key.head_dim, key.page_size), fold_config(cfg, key.head_dim)
    fused = _launch_mode({**constexprs(key, prefill), **flags}, True)
    folding = {**_launch_mode({**constexprs(key, fold), **flags}, True), "FOLD": True}
    prefill_fam, fold_fam = dataclasses.asdict(prefill), dataclasses.asdict(fold)
    for c, fam in ((fused, prefill_fam), (folding, fold_fam)):
        both.setdefault(repr((c, fam)), (c, fam))
    probe = {**fused, "PROBE": True}
    for right in (fused, folding, _launch_mode(split_base, False)):
        pair = (probe, right, prefill_fam, fused)
        cross.setdefault(repr(pair), pair)


def _cross_chunk(key: dict) -> int | None:
    """Geometries one cross-config proof covers: the chain's proofs (PROBE on the left) for groups of 16+ query heads a
    KV head take one (head dim, queries per KV head, page size) a proof, its four mask/cap flags together (fused_equals_fold over the 480 geometries of a
    group of 16 ran out of Z3's time, over 64 of them it took 100-170 s and failed, over 4 it takes 7 s; a group of
    8 proves its 240 in 28 s); the rest take their whole domain in one proof (None)."""
    return 4 if key.get("PROBE") and key.get("GROUP", 1) >= 16 else None


def geometry_constexprs(head_dim: int, page_size: int, dtype: torch.dtype) -> dict:
    """The constexprs every paged-attention launch of one deployment passes, whatever the step: they follow from
    its head dim, page size and dtype alone (the launch config picks the rest)."""
    return {"HEAD_DIM": head_dim, "HEAD_DIM_PAD": next_power_of_two(head_dim), "PAGE_SIZE": page_size,
            "DOT_PRECISION": "ieee" if dtype == torch.float32 else "tf32"}


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: every constexpr config `paged_attention` can launch for the
    geometries of `config.CATALOG`, per kernel, with the launch-config fields it comes from."""
    import dataclasses

    from vosti_plugin.attention import config as cfgmod

    def constexprs(key, cfg) -> dict:
        return {**geometry_constexprs(key.head_dim, key.page_size, key.dtype),
                "QUERIES_PER_KV": cfg.queries_per_kv, "GROUP": cfg.group, "HEAD_BLOCKS": cfg.head_blocks,
                "BLOCK_Q": cfg.block_q, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "SEGMENT": cfg.segment,
                "SEQ_SCAN_CHUNK": _SEQ_SCAN_CHUNK,
                "ROW_SUMS_BY_DOT": cfg.row_sums_by_dot, "KV_TMA": cfg.kv_tma, "FOLD": False, "PROBE": False}

    # every tile sums its rows as its geometry or VOSTI_ATTENTION_ROW_SUMS says, and decode tiles are launched, and so
    # proved, where they follow (cfgmod.decode_tile_rows; the verifier's catalog fingerprint includes both switches)
    # fused prefill launches, FOLD combines and the chain that makes them one algorithm with the split launches are
    # launched, and so proved, only for the geometries VOSTI_PREFILL_FUSED_FROM (or its default) turns them on for
    configs: list[tuple[dict, dict]] = []
    decode: list[tuple[dict, dict]] = []
    both: dict[str, tuple[dict, dict]] = {}   # fused prefill and FOLD launches
    # (decode launch, the prefill launch its rows equal, decode config); (verification-only launch, the launch it is
    # chained to, the launched config, the launched config's constexprs)
    cross_seen: dict[str, tuple] = {}
    for key, cfg in cfgmod.CATALOG:
        cfg = cfgmod.with_row_sums(cfg)
        base = constexprs(key, cfg)
        fam = dataclasses.asdict(cfg)
        decode_cfg = cfgmod.launched_decode_config(cfg)
        decode_fams = [(constexprs(key, decode_cfg), dataclasses.asdict(decode_cfg))] if decode_cfg != cfg else []
        for soft_cap in (False, True):
            for window in (False, True):
                flags = {"USE_SOFT_CAP": soft_cap, "USE_WINDOW": window}
                configs.append((_launch_mode({**base, **flags}, True), fam))
                if cfgmod.fused_prefill_from(key.dtype, key.queries_per_kv) > 0:
                    _both_paths(key, cfg, {**base, **flags}, constexprs, both, cross_seen)
                for d_constexprs, d_fam in decode_fams:
                    left = _launch_mode({**d_constexprs, **flags}, False)
                    decode.append((left, d_fam))
                    pair = (left, _launch_mode({**base, **flags}, False), d_fam)
                    cross_seen.setdefault(repr(pair), pair)   # fp16 and bf16 launch the same constexprs
    split = [(_launch_mode(c, False), fam) for c, fam in configs] + decode
    comb: dict[str, tuple[dict, dict]] = {}
    for c, fam in configs + decode:
        cc = ({n: c[n] for n in ("HEAD_DIM", "HEAD_DIM_PAD", "SEGMENT", "SEQ_SCAN_CHUNK", "USE_WINDOW")}, fam)
        comb.setdefault(repr(cc), cc)
    # A decode config's rows are proved equal to the prefill config's rows of any launch (`across`); two decode
    # launches then agree through a prefill launch of the same row, so the decode configs need no goal of their own.
    return [{"family": "paged_attention", "kernel": _paged_attention_segments_kernel,
             "configs": configs + split + list(both.values()), "cross": list(cross_seen.values()), "cross_only": True,
             "cross_chunk": _cross_chunk},
            {"family": "paged_attention", "kernel": _combine_segments_kernel, "configs": list(comb.values())}]
