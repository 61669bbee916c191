"""Lays requests out in a paged KV cache and runs the attention kernel on them.

`build_paged_batch` scatters each request's logical K/V into randomly chosen physical pages, so the tests,
the GPU checks and the launch-time host-numerics self-test run the kernels on the same layout that vLLM's
paged cache gives them (the reference forward is vosti_plugin.integration.reference_attention).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_attention import paged_attention


@dataclass(frozen=True)
class Request:
    """One sequence: its full logical K/V and the query rows of its last `queries.shape[0]` positions."""

    keys: torch.Tensor  # [kv_len, kv_heads, d]
    values: torch.Tensor  # [kv_len, kv_heads, d]
    queries: torch.Tensor  # [q_len, q_heads, d], rows for positions kv_len - q_len .. kv_len - 1

    @property
    def kv_len(self) -> int:
        return self.keys.shape[0]

    @property
    def q_len(self) -> int:
        return self.queries.shape[0]

    def positions(self) -> torch.Tensor:
        return torch.arange(self.kv_len - self.q_len, self.kv_len)

    def chunk(self, begin: int, end: int) -> "Request":
        """The request as a chunked-prefill step would see it: query rows [begin, end), KV up to end."""
        first = self.kv_len - self.q_len
        return Request(self.keys[: first + end], self.values[: first + end], self.queries[begin:end])


@dataclass(frozen=True)
class PagedBatch:
    """Kernel inputs for a batch of requests, plus where each request's rows sit in `q`."""

    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    row_slices: tuple[slice, ...]
    max_seqlen_k: int

    def empty_out(self) -> torch.Tensor:
        return torch.full_like(self.q, float("nan"))


def random_request(
    kv_len: int, q_len: int, num_q_heads: int, num_kv_heads: int, head_dim: int, *, seed: int,
    dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
) -> Request:
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(kv_len, num_kv_heads, head_dim, generator=gen)
    values = torch.randn(kv_len, num_kv_heads, head_dim, generator=gen)
    queries = torch.randn(q_len, num_q_heads, head_dim, generator=gen)
    return Request(*(t.to(dtype=dtype, device=device) for t in (keys, values, queries)))


def build_paged_batch(
    requests: Sequence[Request],
    *,
    page_size: int,
    seed: int = 0,
    spare_pages: int = 3,
    spare_table_columns: int = 2,
    padding_rows: int = 0,
    fused_kv: bool = False,
) -> PagedBatch:
    """Scatter the requests' K/V into shuffled physical pages of a NaN-filled cache.

    Unused cache slots, unused block-table entries (pointing at other pages) and padding query rows hold
    NaN or foreign data, so any read a kernel should not make shows up in its output. With fused_kv the
    caches are `.unbind(1)` views of one [blocks, 2, page, kv_heads, d] tensor, as vLLM allocates them.
    """
    first = requests[0]
    device, dtype = first.keys.device, first.keys.dtype
    num_kv_heads, head_dim = first.keys.shape[1], first.keys.shape[2]
    pages_per_request = [-(-r.kv_len // page_size) for r in requests]
    num_blocks = sum(pages_per_request) + spare_pages
    gen = torch.Generator().manual_seed(seed)
    physical = torch.randperm(num_blocks, generator=gen)

    shape = (num_blocks, page_size, num_kv_heads, head_dim)
    if fused_kv:
        kv = torch.full((num_blocks, 2, page_size, num_kv_heads, head_dim), float("nan"), dtype=dtype, device=device)
        k_cache, v_cache = kv.unbind(1)
    else:
        k_cache = torch.full(shape, float("nan"), dtype=dtype, device=device)
        v_cache = torch.full(shape, float("nan"), dtype=dtype, device=device)

    width = max(pages_per_request) + spare_table_columns
    block_table = torch.randint(0, num_blocks, (len(requests), width), generator=gen, dtype=torch.int32)
    next_page = 0
    for s, (request, num_pages) in enumerate(zip(requests, pages_per_request)):
        pages = physical[next_page : next_page + num_pages]
        next_page += num_pages
        block_table[s, :num_pages] = pages.to(torch.int32)
        positions = torch.arange(request.kv_len)
        blocks = pages[positions // page_size].to(device)
        offsets = (positions % page_size).to(device)
        k_cache[blocks, offsets] = request.keys
        v_cache[blocks, offsets] = request.values

    q_lens = [r.q_len for r in requests]
    num_q_heads = first.queries.shape[1]
    q = torch.full((sum(q_lens) + padding_rows, num_q_heads, head_dim), float("nan"), dtype=dtype, device=device)
    starts = [0]
    for n in q_lens:
        starts.append(starts[-1] + n)
    for request, begin in zip(requests, starts):
        q[begin : begin + request.q_len] = request.queries
    row_slices = tuple(slice(b, e) for b, e in zip(starts[:-1], starts[1:]))
    return PagedBatch(
        q=q,
        k_cache=k_cache,
        v_cache=v_cache,
        block_table=block_table.to(device),
        seq_lens=torch.tensor([r.kv_len for r in requests], dtype=torch.int32, device=device),
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        row_slices=row_slices,
        max_seqlen_k=max(r.kv_len for r in requests),
    )


def run_paged_batch(batch: PagedBatch, config: AttentionLaunchConfig, **kwargs) -> list[torch.Tensor]:
    """Run `paged_attention` on a batch (NaN-filled output) and return each request's output rows."""
    kwargs.setdefault("max_seqlen_k", batch.max_seqlen_k)
    out = batch.empty_out()
    paged_attention(
        batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.seq_lens, batch.query_start_loc, out,
        config=config, **kwargs,
    )
    return [out[rows] for rows in batch.row_slices]


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shapes, dtypes and bytes (NaN payloads and signed zeros included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
