"""Sampler ops whose result for a row is a function of that row and its own parameters only.

vLLM picks its top-k / top-p algorithm from the batch: on CUDA (0.26, vllm/v1/sample/ops/
topk_topp_sampler.py:356) a batch of 8 or more rows takes the Triton pivot-search kernel, which keeps
exactly k tokens (ties broken by vocab index), and a smaller batch takes a sort whose top-k keeps every
token tied with the k-th value and whose top-p cumsum (CUB for one row, a row scan for several) rounds
differently. The same row therefore gets a different kept set when its neighbours change.

Here every decision is made on exact quantities, by one Triton kernel per call (one program per row,
fixed iteration count, no host sync: vosti_plugin/sampling/top_k_top_p.py, proved row-invariant by
`vosti verify --kernel top_k_top_p_kernel`):
* top-k: the k-th largest value of the row (a bisection over the ordered fp32 keys); tokens below it
  are masked, tokens tied with it kept;
* top-p: the row's softmax through vosti's row-invariant kernel, each probability truncated to 2**-52
  fixed point, summed in the ascending order of the logits (exact integer sums, so order-free); the cut
  is a value, so ties at the cut are kept together;
* top-n for logprobs: one int64 key per token, (order-preserving bits of the value, inverted index),
  so there are no ties: values descending, equal values by ascending token id.
`reference_top_k_top_p` is the same decisions in torch (sort + int64 cumsum, host sync for the widest k):
the tests compare the kernel with it bit for bit, and CPU runs it (the interpreted kernel is too slow).
"""
from __future__ import annotations

import torch

_FIXED_ONE = float(2**52)


def softmax_fp32(x: torch.Tensor) -> torch.Tensor:
    try:
        from vosti_plugin.ops import softmax as vosti_softmax
    except ImportError:  # dense ops not shipped: the aten override is absent too
        return torch.softmax(x.float(), dim=-1)
    return vosti_softmax.softmax(x.float().contiguous(), dtype=torch.float32)


def log_softmax_fp32(x: torch.Tensor) -> torch.Tensor:
    try:
        from vosti_plugin.ops import softmax as vosti_softmax
    except ImportError:
        return torch.log_softmax(x.float(), dim=-1)
    return vosti_softmax.log_softmax(x.float().contiguous(), dtype=torch.float32)


def mask_below_kth(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """In place: -inf for every token of row r below the k[r]-th largest value (k >= vocab: no mask)."""
    vocab = logits.shape[-1]
    k = k.to(device=logits.device, dtype=torch.long).view(-1)
    no_mask = k >= vocab
    k = k.masked_fill(no_mask, 1).clamp_(min=1)
    widest = int(k.max())
    kth = torch.topk(logits, widest, dim=-1).values.gather(1, (k - 1).unsqueeze(1))
    kth.masked_fill_(no_mask.unsqueeze(1), float("-inf"))
    return logits.masked_fill_(logits < kth, float("-inf"))


def _fixed_point(probs: torch.Tensor) -> torch.Tensor:
    # fp32 -> fp64 and * 2**52 are exact; the truncation to int64 is the only rounding, per element.
    return (probs.double() * _FIXED_ONE).to(torch.int64)


def nucleus_cut(row_logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """For rows with top-p p[r] < 1: the smallest value that stays, shape [rows, 1] (fp32).

    vLLM's rule: sort ascending, drop the prefix whose cumulative probability is <= 1 - p, keep at
    least the largest token. The probabilities are the softmax of the row in its own order (tied
    values have equal probabilities, so the sums do not depend on how a sort orders ties)."""
    rows = row_logits.float()
    ascending, order = torch.sort(rows, dim=-1)
    cumulative = _fixed_point(softmax_fp32(rows)).gather(1, order).cumsum(dim=-1)
    limit = _fixed_point((1 - p.to(device=row_logits.device, dtype=torch.float32)).view(-1, 1))
    dropped = (cumulative <= limit).sum(dim=-1, keepdim=True).clamp_(max=ascending.shape[-1] - 1)
    return ascending.gather(1, dropped)


def mask_outside_nucleus(logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    p = p.to(device=logits.device, dtype=torch.float32).view(-1)
    rows = torch.nonzero(p < 1.0).view(-1)
    if rows.numel() == 0:
        return logits
    sub = logits.index_select(0, rows)
    cut = nucleus_cut(sub, p.index_select(0, rows))
    sub = sub.masked_fill(sub.float() < cut, float("-inf"))
    logits.index_copy_(0, rows, sub)
    return logits


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """Drop-in for vLLM's `apply_top_k_top_p` (top-k first, then top-p over what is left); works in place."""
    if logits.dim() != 2 or logits.device.type == "cpu":
        # CPU: the kernel runs through Triton's interpreter at ~0.5 s a row; the torch reference makes the
        # same decisions bit for bit (tests/test_sampling_kernels.py), and on the host nothing waits on a
        # device, so its k.max() / nonzero are no sync.
        return reference_top_k_top_p(logits, k, p)
    from vosti_plugin.sampling import top_k_top_p

    return top_k_top_p.top_k_top_p(logits, k, p)


def reference_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """The kernel's decisions in torch (sort-based; syncs with the host for the widest k); may work in place."""
    if k is not None:
        logits = mask_below_kth(logits, k)
    if p is not None:
        logits = mask_outside_nucleus(logits, p)
    return logits


def _ordered_bits(x: torch.Tensor) -> torch.Tensor:
    """int64 whose order is the float order of x (fp32 bits, negative ones flipped)."""
    bits = x.float().contiguous().view(torch.int32).to(torch.int64)
    return torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


def tie_free_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the k largest entries of each row of a 2-D x, values descending, equal
    values ordered by ascending index: a function of the row alone, unlike torch.topk's tie choice."""
    vocab = x.shape[-1]
    shift = max(1, (vocab - 1).bit_length())
    low = (1 << shift) - 1
    columns = torch.arange(vocab, device=x.device, dtype=torch.int64)
    keys = (_ordered_bits(x) << shift) | (low - columns)
    top = torch.topk(keys, k, dim=-1).values
    indices = low - (top & low)
    return x.gather(-1, indices), indices
