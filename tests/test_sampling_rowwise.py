"""vosti's sampler ops (vosti_plugin/sampling/rowwise.py): a row's result is bitwise the same alone and
inside any batch, next to rows with other k / p (and none), and it follows vLLM's rules: top-k keeps
every token tied with the k-th value, top-p drops the ascending prefix with cumulative probability
<= 1 - p but keeps the largest token, logprob top-n orders equal values by token id."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from vosti_plugin.sampling import rowwise

VOCAB = 97


def _rows(seed: int, n: int, quantum: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, VOCAB, generator=g) * 3
    return (x / quantum).round() * quantum if quantum else x   # a coarse quantum makes many ties


def _params(seed: int, n: int):
    g = torch.Generator().manual_seed(seed + 1)
    k = torch.randint(1, VOCAB + 1, (n,), generator=g, dtype=torch.int32)
    k[torch.rand(n, generator=g) < 0.3] = VOCAB   # rows without top-k
    p = torch.rand(n, generator=g) * 0.9 + 0.05
    p[torch.rand(n, generator=g) < 0.3] = 1.0   # rows without top-p
    return k, p


def _alone(x, k, p, r):
    return rowwise.apply_top_k_top_p(x[r : r + 1].clone(), k[r : r + 1], p[r : r + 1])


@given(seed=st.integers(0, 10_000), n=st.integers(1, 12), quantum=st.sampled_from([0.0, 0.25, 1.0]))
def test_top_k_top_p_row_alone_equals_row_in_batch(seed, n, quantum):
    x = _rows(seed, n, quantum)
    k, p = _params(seed, n)
    batch = rowwise.apply_top_k_top_p(x.clone(), k, p)
    for r in range(n):
        assert torch.equal(batch[r : r + 1].view(torch.int32), _alone(x, k, p, r).view(torch.int32)), r
    only_k = rowwise.apply_top_k_top_p(x.clone(), k, None)
    for r in range(n):
        assert torch.equal(only_k[r], rowwise.apply_top_k_top_p(x[r : r + 1].clone(), k[r : r + 1], None)[0])


@given(seed=st.integers(0, 10_000), k=st.integers(1, VOCAB), quantum=st.sampled_from([0.0, 0.5, 2.0]))
def test_top_k_keeps_exactly_the_values_at_or_above_the_kth(seed, k, quantum):
    x = _rows(seed, 1, quantum)
    out = rowwise.apply_top_k_top_p(x.clone(), torch.tensor([k]), None)
    kth = torch.sort(x[0], descending=True).values[k - 1]
    assert torch.equal(torch.isfinite(out[0]), x[0] >= kth)
    assert torch.equal(out[0][x[0] >= kth], x[0][x[0] >= kth])


def _nucleus_reference(row: np.ndarray, p: float) -> tuple[np.ndarray, bool]:
    """Kept mask by vLLM's rule in float64, and whether the decision is far from the boundary."""
    asc = np.sort(row)
    e = np.exp(asc.astype(np.float64) - asc.max())
    cum = np.cumsum(e / e.sum())
    limit = float(np.float32(1.0) - np.float32(p))
    dropped = min(int((cum <= limit).sum()), len(asc) - 1)
    clear = np.abs(cum - limit).min() > 1e-6
    return row >= asc[dropped], clear


@given(seed=st.integers(0, 10_000), p=st.floats(0.01, 0.99))
def test_top_p_follows_vllm_rule(seed, p):
    x = _rows(seed, 1, 0.0)
    out = rowwise.apply_top_k_top_p(x.clone(), None, torch.tensor([p]))
    kept, clear = _nucleus_reference(x[0].numpy(), p)
    if clear:
        assert np.array_equal(torch.isfinite(out[0]).numpy(), kept)


def test_top_p_keeps_the_largest_token_and_ties_at_the_cut_together():
    row = torch.tensor([[0.0, 5.0, 5.0, 1.0, 5.0]])
    out = rowwise.apply_top_k_top_p(row.clone(), None, torch.tensor([0.1]))
    assert torch.isfinite(out[0]).tolist() == [False, True, True, False, True]


@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), k=st.integers(1, 20), quantum=st.sampled_from([0.5, 2.0]))
def test_tie_free_topk_orders_ties_by_token_id_and_ignores_batch(seed, n, k, quantum):
    x = _rows(seed, n, quantum)
    values, indices = rowwise.tie_free_topk(x, k)
    assert torch.equal(values, torch.topk(x, k).values)
    for r in range(n):
        order = sorted(range(VOCAB), key=lambda j: (-float(x[r, j]), j))[:k]
        assert indices[r].tolist() == order
        alone_v, alone_i = rowwise.tie_free_topk(x[r : r + 1], max(k - 3, 1))
        assert alone_i[0].tolist() == order[: max(k - 3, 1)]


def test_tie_free_topk_handles_negative_zero_and_infinities():
    x = torch.tensor([[-0.0, 0.0, float("-inf"), -1.0, float("inf"), 3.0]])
    values, indices = rowwise.tie_free_topk(x, 6)
    assert indices[0].tolist() == [4, 5, 1, 0, 3, 2]
    assert torch.equal(values, x.gather(1, indices))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_logits_are_masked_in_their_own_dtype(dtype):
    x = _rows(7, 5, 0.0).to(dtype)
    k, p = _params(7, 5)
    batch = rowwise.apply_top_k_top_p(x.clone(), k, p)
    assert batch.dtype == dtype
    for r in range(5):
        assert torch.equal(batch[r : r + 1], _alone(x, k, p, r))
