"""Put vosti's sampler in vLLM while vosti is selected, and take it out again (`uninstall()`): the
`sampling` group of vosti_plugin.vllm.patches, whose replacements are made here.

What the group replaces:
* `apply_top_k_top_p` in the modules of compat.TOP_K_TOP_P_MODULES -> rowwise.apply_top_k_top_p
  (V1 sampler and the V2 runner's sampler, which 0.26 uses on CUDA): on CUDA the batch-invariant
  Triton kernel vosti_plugin.sampling.top_k_top_p (proved row-invariant, launch-guarded, no host sync),
  on CPU its bit-identical torch reference;
* `TopKTopPSampler.__init__` -> stock init, then `forward` = vosti's (row-wise masks, vosti softmax,
  noise only from each request's generator; replaces the CPU fused Gumbel kernel and FlashInfer);
* `torch` seen by the modules of compat.LOGPROB_TOPK_MODULES -> the same torch with a tie-free `topk`
  (the logprob top-n: torch.topk picks among tied values by batch shape and by n, the batch's largest);
* `GPUModelRunner._bookkeeping_sync` (V1 runner) -> CPU generators of discarded rows are restored from
  the state recorded before the draw instead of vLLM's offset rewind (which crashes on CPU);
* `InputProcessor._validate_params` -> refusals.check, then the stock checks (HTTP 400 per request).
"""
from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Iterator

import torch

from vosti_plugin.sampling import generators, refusals, rowwise


def is_installed() -> bool:
    from vosti_plugin.vllm import patches

    return patches.is_applied("sampling")


# ---------------------------------------------------------------- sampler forward


def _processed(logprobs_mode: str, logits: torch.Tensor) -> torch.Tensor | None:
    if logprobs_mode == "processed_logits":
        return logits
    if logprobs_mode == "processed_logprobs":
        return rowwise.log_softmax_fp32(logits)
    return None


def vosti_sampler_forward(self, logits, generators_by_row, k, p):
    """TopKTopPSampler.forward under vosti (every platform): masks, then Gumbel-max with exponential
    noise drawn row by row from the request's own generator (vLLM's `random_sample`)."""
    from vllm.v1.sample.ops import topk_topp_sampler

    logits = rowwise.apply_top_k_top_p(logits, k, p)
    returned = _processed(self.logprobs_mode, logits)
    probs = rowwise.softmax_fp32(logits)
    generators.record_before_draw(generators_by_row)
    sampled = topk_topp_sampler.random_sample(probs, generators_by_row, getattr(self, "use_fp64_gumbel", False))
    return sampled, returned


def sampler_init(stock):
    @functools.wraps(stock)
    def __init__(self, *args, **kwargs):
        stock(self, *args, **kwargs)
        self.forward = types.MethodType(vosti_sampler_forward, self)

    return __init__


# ---------------------------------------------------------------- logprob top-n


class _TorchWithTieFreeTopk:
    """`torch` for a vLLM module whose only torch.topk use is the logprob top-n."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def topk(input, k, dim=-1, largest=True, sorted=True, **kwargs):
        if kwargs or not largest or input.dim() != 2 or dim not in (-1, 1) or input.dtype.is_complex:
            return torch.topk(input, k, dim=dim, largest=largest, sorted=sorted, **kwargs)
        return torch.return_types.topk(rowwise.tie_free_topk(input, int(k)))


_TORCH_PROXY = _TorchWithTieFreeTopk()


def torch_with_tie_free_topk(stock):
    return _TORCH_PROXY


def module_uses_stock_torch(module) -> bool:
    return getattr(module, "torch", None) is torch


# ---------------------------------------------------------------- runner / input processor


def bookkeeping_sync(stock):
    @functools.wraps(stock)
    def bookkeeping_sync(self, *args, **kwargs):
        batch = self.input_batch
        mask = getattr(self, "discard_request_mask", None)
        if mask is None or not batch.generators:
            return stock(self, *args, **kwargs)
        discarded = {int(i) for i in mask.np[: batch.num_reqs].nonzero()[0]}
        restored = {
            i for i in discarded
            if (gen := batch.generators.get(i)) is not None and gen.device.type == "cpu" and generators.rewind(gen)
        }
        if not restored:
            return stock(self, *args, **kwargs)
        every = batch.generators
        batch.generators = {i: g for i, g in every.items() if i not in restored}
        try:
            return stock(self, *args, **kwargs)
        finally:
            batch.generators = every

    return bookkeeping_sync


def validate_params(stock):
    @functools.wraps(stock)
    def validate_params(self, params, *args, **kwargs):
        refusals.check(params)   # first, so vosti's reason is the one the client sees
        return stock(self, params, *args, **kwargs)

    return validate_params


# ---------------------------------------------------------------- install / uninstall


def install() -> None:
    """Idempotent. Called with the dense ops in every process that runs vLLM under vosti."""
    from vosti_plugin.vllm import patches

    patches.apply("sampling")


def uninstall() -> None:
    """Stock vLLM sampling again (samplers built while installed keep vosti's forward)."""
    from vosti_plugin.vllm import patches

    patches.undo("sampling")
    generators.forget()


@contextlib.contextmanager
def installed() -> Iterator[None]:
    already = is_installed()
    install()
    try:
        yield
    finally:
        if not already:
            uninstall()
