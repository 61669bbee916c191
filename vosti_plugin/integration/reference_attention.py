"""Plain-torch reference attention in float64, written independently of the kernels: dense logical K/V, an
explicit mask, a float64 softmax. Tests and the GPU checks compare the kernels against it."""

from __future__ import annotations

import torch


def reference_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    positions: torch.Tensor,
    *,
    scale: float,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
) -> torch.Tensor:
    """Causal softmax attention in float64.

    queries: [n, q_heads, d]; keys, values: [kv_len, kv_heads, d] (logical order); positions: [n] absolute
    position of each query row. Row at position p sees keys j with lo <= j <= p, lo = max(0, p - w + 1).
    Returns [n, q_heads, d] float64.
    """
    q = queries.to(torch.float64)
    k = keys.to(torch.float64)
    v = values.to(torch.float64)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if soft_cap is not None and soft_cap > 0:
        scores = soft_cap * torch.tanh(scores / soft_cap)
    key_pos = torch.arange(k.shape[0])[None, :]
    query_pos = positions.to(torch.int64).cpu()[:, None]
    visible = key_pos <= query_pos
    if sliding_window is not None and sliding_window > 0:
        visible &= key_pos > query_pos - sliding_window
    scores = scores.masked_fill(~visible.to(scores.device)[None], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("hqk,khd->qhd", weights, v)
