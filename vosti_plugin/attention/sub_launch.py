"""Run one step's attention as several launches of at most C query tokens each (split path).

The split path's workspace grows with tokens x segments; a step larger than the workspace is cut into
contiguous token ranges, each launched alone. This stays inside the kernel contract, which is what makes
it safe: a row's output depends only on its query, its position and the K/V of its prefix, not on which
other rows share the launch (batch invariance), and a range that cuts a sequence's query in the middle is
a chunked prefill of that sequence: launching query rows [a, b) of a sequence with KV length L and query
length n as a sequence of KV length L - (n - b) puts row a + i at position L - n + a + i, as in the
whole launch. Plans come from the host copy of query_start_loc only (no device synchronisation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch

from vosti_plugin.attention.paged_attention import split_workspace_numel


def deployment_path(*, max_num_tokens: int, max_graph_tokens: int, max_model_len: int, page_size: int,
                    segment: int, num_q_heads: int, head_dim: int, limit_bytes: int,
                    stretch_bytes: int = 0) -> tuple[Literal["split", "fused"], int]:
    """(path, tokens per split launch) for a whole deployment, from static sizes only. Split when a
    CUDA-graph step (max_graph_tokens; 1 without graphs) fits one launch of the workspace limit; larger
    steps then run in launches of `capacity` tokens. Fused (capacity 0) otherwise. The limit grows to what
    one graph step needs when that is at most `stretch_bytes`: a long max_model_len (Llama-3.1's 128K
    needs 4.3 MB per token) keeps the split path, whose decode is parallel over segments."""
    pages = -(-max_model_len // page_size)
    segments = -(-(pages * page_size) // segment)
    per_token = 4 * split_workspace_numel(1, num_q_heads, head_dim, segments)
    graph_bytes = max(1, max_graph_tokens) * per_token
    if limit_bytes < graph_bytes <= stretch_bytes:
        limit_bytes = graph_bytes
    capacity = min(max_num_tokens, limit_bytes // per_token)
    if capacity >= max(1, max_graph_tokens):
        return "split", capacity
    return "fused", 0


@dataclass(frozen=True)
class Piece:
    seq: int          # sequence index in the step
    begin: int        # first query row of the sequence in this launch (relative to the sequence)
    end: int          # one past the last
    trim: int         # query rows of the sequence after `end`: its KV length shrinks by this much


def plan(query_start_loc: Sequence[int], capacity: int) -> list[list[Piece]]:
    """Consecutive launches covering every query token in order, each with at most `capacity` tokens."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1 token, got {capacity}")
    launches: list[list[Piece]] = []
    current: list[Piece] = []
    room = capacity
    for s in range(len(query_start_loc) - 1):
        q_len = int(query_start_loc[s + 1]) - int(query_start_loc[s])
        begin = 0
        while begin < q_len:
            end = min(q_len, begin + room)
            current.append(Piece(s, begin, end, q_len - end))
            room -= end - begin
            begin = end
            if room == 0:
                launches.append(current)
                current, room = [], capacity
    if current:
        launches.append(current)
    return launches


def _rows_on_16_bytes(rows: torch.Tensor) -> torch.Tensor:
    """`rows`, or a copy where they start off 16 bytes: Triton compiles a kernel per pointer divisibility by 16, so a
    block table whose width is not a multiple of 4 entries, sliced at an odd sequence, would compile another kernel
    while serving."""
    return rows if rows.data_ptr() % 16 == 0 else rows.clone()


def run_in_launches(launch, q: torch.Tensor, out: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                    query_start_loc_cpu: Sequence[int], capacity: int) -> None:
    """Call `launch(q, out, block_table, seq_lens, query_start_loc)` once per planned launch, on views of
    `q`/`out` and per-launch metadata; rows past the last query token (padding) are zeroed."""
    starts = [int(x) for x in query_start_loc_cpu]
    device = seq_lens.device
    for pieces in plan(starts, capacity):
        first, last = pieces[0], pieces[-1]
        t0 = starts[first.seq] + first.begin
        t1 = starts[last.seq] + last.end
        seqs = slice(first.seq, last.seq + 1)
        trims = torch.tensor([p.trim for p in pieces], dtype=seq_lens.dtype, device=device)
        qsl = [0]
        for p in pieces:
            qsl.append(qsl[-1] + p.end - p.begin)
        launch(q[t0:t1], out[t0:t1], _rows_on_16_bytes(block_table[seqs]), seq_lens[seqs] - trims,
               torch.tensor(qsl, dtype=torch.int32, device=device))
    if out.shape[0] > starts[-1]:
        out[starts[-1]:].zero_()
