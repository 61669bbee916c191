"""Contracts and catalog of the shipped paged-attention kernels (vosti_plugin/attention).

Goal `causal_row_invariance` covers batch invariance, prefill vs decode, chunked prefill and different
page tables at once: a query row x of sequence sL (left launch) and a row y of sequence sR (right launch)
at the same absolute position p, with equal q rows and equal logical K/V on the row's visible range
(through each side's own block table), get bitwise equal outputs.  Everything else is free: number of
sequences, other sequences' lengths and pages, query lengths, where the row sits in its program tile.
"""
from __future__ import annotations

from typing import Any

from verifier.contracts import contract, contract_of, goal, scalar, tensor

_TENSORS = {
    "q_ptr": tensor(("T", "HQ", "HEAD_DIM"), ("stride_qt", "stride_qh", 1)),
    "k_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_kb", "stride_kp", "stride_kh", 1)),
    "v_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_vb", "stride_vp", "stride_vh", 1)),
    "block_table_ptr": tensor(("S", "MB"), ("stride_bt", 1), "int32"),
    "seq_lens_ptr": tensor(("S",), (1,), "int32"),
    "query_start_loc_ptr": tensor(("S1",), (1,), "int32"),
    "out_ptr": tensor(("T", "HQ", "HEAD_DIM"), ("stride_ot", "stride_oh", 1)),
    # the split path's fp32 workspace, indexed (token * num_q_heads + head) * num_segments + segment
    "part_m_ptr": tensor(("T", "HQ", "NSEG"), ("num_q_heads*num_segments", "num_segments", 1)),
    "part_l_ptr": tensor(("T", "HQ", "NSEG"), ("num_q_heads*num_segments", "num_segments", 1)),
    "part_acc_ptr": tensor(("T", "HQ", "NSEG", "HEAD_DIM"),
                           ("num_q_heads*num_segments*HEAD_DIM", "num_segments*HEAD_DIM", "HEAD_DIM", 1)),
    "scale": scalar("float32"),
    "soft_cap": scalar("float32"),
}


def _sequence(side: str, seq: str, row: str) -> tuple[str, ...]:
    """Well-formed varlen metadata on one side and the selected row's position p."""
    qsl, n = f"{side}.query_start_loc_ptr", f"{side}.num_seqs"
    return (
        f"0 <= {seq} < {n}", f"{qsl}[0] == 0",
        f"forall(i, 0 <= i <= {n}, forall(j, i <= j <= {n}, {qsl}[i] <= {qsl}[j]))",
        f"{qsl}[{n}] <= {side}.T",
        f"{qsl}[{seq}] <= {row} < {qsl}[{seq} + 1]",
        f"{qsl}[{seq} + 1] - {qsl}[{seq}] <= {side}.seq_lens_ptr[{seq}]",
        f"{side}.seq_lens_ptr[{seq}] - ({qsl}[{seq} + 1] - {qsl}[{seq}]) + {row} - {qsl}[{seq}] == p",
    )


def _kv_equal(lo: str) -> tuple[str, ...]:
    page = "{s}.block_table_ptr[{q}, j // PAGE_SIZE], j % PAGE_SIZE, :, :"
    out = []
    for t in ("k_ptr", "v_ptr"):
        left = f"L.{t}[" + page.format(s="L", q="sL") + "]"
        right = f"R.{t}[" + page.format(s="R", q="sR") + "]"
        out.append(f"forall(j, {lo} <= j <= p, {left} == {right})")
    return tuple(out)


def _writer(side: str, seq: str, row: str) -> dict[str, str]:
    qsl = f"{side}.query_start_loc_ptr"
    return {"pid0": f"{qsl}[{seq}] // BLOCK_Q + {seq} + ({row} - {qsl}[{seq}]) // BLOCK_Q",
            "pid1": "e1 // QUERIES_PER_KV",
            "lane0": f"(({row} - {qsl}[{seq}]) % BLOCK_Q) * QUERIES_PER_KV + e1 % QUERIES_PER_KV"}


LO = "ite(USE_WINDOW, max(0, p - window + 1), 0)"


def _partials_equal(h: str, g: str) -> tuple[str, ...]:
    """The split path's partials (m, l, acc) of row x / y, head h, segment g."""
    return (f"L.part_m_ptr[x, {h}, {g}] == R.part_m_ptr[y, {h}, {g}]",
            f"L.part_l_ptr[x, {h}, {g}] == R.part_l_ptr[y, {h}, {g}]",
            f"L.part_acc_ptr[x, {h}, {g}, :] == R.part_acc_ptr[y, {h}, {g}, :]")


def _segments_range(g: str) -> str:
    return f"({LO}) // SEGMENT <= {g} <= p // SEGMENT"


def _causal_goal():
    lo = LO
    return goal(
        "causal_row_invariance",
        when="FUSED",
        same=("num_q_heads", "HQ", "HKV", "scale", "soft_cap", "window"),
        pre=("num_q_heads == HQ", "HQ == HKV * QUERIES_PER_KV", "window >= 1", "p >= 0")
        + _sequence("L", "sL", "x") + _sequence("R", "sR", "y")
        + ("L.q_ptr[x, :, :] == R.q_ptr[y, :, :]",) + _kv_equal(lo),
        post=("L.out_ptr[x, :, :] == R.out_ptr[y, :, :]",),
        witness={"L": {**_writer("L", "sL", "x"), "pid2": "0"}, "R": {**_writer("R", "sR", "y"), "pid2": "0"}},
    )


def _split_goal():
    parts = _partials_equal("h", "g")
    return goal(
        "causal_segment_partials",
        when="not FUSED",
        same=("num_q_heads", "HQ", "HKV", "scale", "soft_cap", "window"),
        pre=("num_q_heads == HQ", "HQ == HKV * QUERIES_PER_KV", "window >= 1", "p >= 0")
        + _sequence("L", "sL", "x") + _sequence("R", "sR", "y")
        + ("p // SEGMENT < L.num_segments", "p // SEGMENT < R.num_segments")
        + ("L.q_ptr[x, :, :] == R.q_ptr[y, :, :]",) + _kv_equal(LO),
        post=tuple(f"forall(h, 0 <= h < HQ, forall(g, {_segments_range('g')}, {c}))" for c in parts),
        witness={"L": {**_writer("L", "sL", "x").copy(), "pid1": "h // QUERIES_PER_KV",
                       "lane0": "((x - L.query_start_loc_ptr[sL]) % BLOCK_Q) * QUERIES_PER_KV + h % QUERIES_PER_KV",
                       "pid2": "g", "seg": "g"},
                 "R": {**_writer("R", "sR", "y").copy(), "pid1": "h // QUERIES_PER_KV",
                       "lane0": "((y - R.query_start_loc_ptr[sR]) % BLOCK_Q) * QUERIES_PER_KV + h % QUERIES_PER_KV",
                       "pid2": "g", "seg": "g"}},
    )


SEGMENTS_FUSED = contract(
    params=_TENSORS,
    grid=("T // BLOCK_Q + num_seqs", "HKV", "ite(FUSED, 1, num_segments)"),
    verif=[_causal_goal(), _split_goal()],
    symbolic=("HEAD_DIM", "PAGE_SIZE", "BLOCK_N", "USE_SOFT_CAP", "USE_WINDOW"),
    assume=("HEAD_DIM >= 1", "PAGE_SIZE >= 1", "QUERIES_PER_KV >= 1", "BLOCK_Q >= 1",
            "BLOCK_M == BLOCK_Q * QUERIES_PER_KV", "BLOCK_N >= 1", "SEGMENT % BLOCK_N == 0"),
)


COMBINE = contract(
    params={"out_ptr": _TENSORS["out_ptr"], "part_m_ptr": _TENSORS["part_m_ptr"],
            "part_l_ptr": _TENSORS["part_l_ptr"], "part_acc_ptr": _TENSORS["part_acc_ptr"],
            "seq_lens_ptr": _TENSORS["seq_lens_ptr"], "query_start_loc_ptr": _TENSORS["query_start_loc_ptr"]},
    grid=("T", "HQ"),
    verif=[goal(
        "segment_fold_invariance",
        same=("num_q_heads", "HQ", "window"),
        pre=("num_q_heads == HQ", "window >= 1", "p >= 0")
        + _sequence("L", "sL", "x") + _sequence("R", "sR", "y")
        + tuple(f"forall(h, 0 <= h < HQ, forall(g, {_segments_range('g')}, {c}))" for c in _partials_equal("h", "g")),
        post=("L.out_ptr[x, :, :] == R.out_ptr[y, :, :]",),
        witness={"L": {"pid0": "x", "pid1": "e1"}, "R": {"pid0": "y", "pid1": "e1"}},
    )],
    symbolic=("HEAD_DIM",),
    assume=("HEAD_DIM >= 1",),
)


def entries() -> list[dict]:
    import dataclasses

    import torch

    from vosti_plugin.attention import config as cfgmod
    from vosti_plugin.attention import paged_attention as pa

    kernel = pa._paged_attention_segments_kernel
    if contract_of(kernel) is None:
        SEGMENTS_FUSED(kernel)
    configs: list[tuple[dict, dict]] = []
    for key, cfg in cfgmod.CATALOG:
        base = {"HEAD_DIM": key.head_dim, "PAGE_SIZE": key.page_size, "QUERIES_PER_KV": cfg.queries_per_kv,
                "BLOCK_Q": cfg.block_q, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "SEGMENT": cfg.segment,
                "SEQ_SCAN_CHUNK": pa._SEQ_SCAN_CHUNK,
                "DOT_PRECISION": "ieee" if key.dtype == torch.float32 else "tf32"}
        fam = dataclasses.asdict(cfg)
        for soft_cap in (False, True):
            for window in (False, True):
                configs.append(({**base, "USE_SOFT_CAP": soft_cap, "USE_WINDOW": window, "FUSED": True}, fam))
    combine = pa._combine_segments_kernel
    if contract_of(combine) is None:
        COMBINE(combine)
    split = [({**c, "FUSED": False}, fam) for c, fam in configs]
    comb = []
    for c, fam in configs:
        cc = ({"HEAD_DIM": c["HEAD_DIM"], "SEGMENT": c["SEGMENT"], "SEQ_SCAN_CHUNK": c["SEQ_SCAN_CHUNK"],
               "USE_WINDOW": c["USE_WINDOW"]}, fam)
        if cc not in comb:
            comb.append(cc)
    return [{"family": "paged_attention", "kernel": kernel, "configs": configs + split},
            {"family": "paged_attention", "kernel": combine, "configs": comb}]


_ = Any
