"""The dense ops as opaque torch custom ops (`torch.ops.vosti.*`).

vLLM's layers call these while vosti is installed. Being custom ops with fake implementations,
torch.compile / Inductor keep them as single graph nodes: Inductor can neither fuse, retile nor
re-lower them, so the compiled graph runs exactly our kernels; CUDA graphs capture them as launched.
Importing this module registers the ops once per process.
"""
from __future__ import annotations

import torch

from vosti_plugin import forward_counters
from vosti_plugin.ops import activation, matmul, rmsnorm

__all__ = ["act_and_mul", "fused_add_rms_norm", "linear", "norm_add_rms_norm", "qk_rms_norm", "rms_norm"]


@torch.library.custom_op("vosti::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    if forward_counters.counts is not None:
        forward_counters.counts["linear"] += 1
    return matmul.linear(x, weight, bias)


@linear.register_fake
def _linear_fake(x, weight, bias):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.custom_op("vosti::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool) -> torch.Tensor:
    if forward_counters.counts is not None:
        forward_counters.counts["rms_norm"] += 1
    return rmsnorm.rms_norm(x, weight, eps, gemma)


@rms_norm.register_fake
def _rms_norm_fake(x, weight, eps, gemma):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("vosti::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    if forward_counters.counts is not None:
        forward_counters.counts["fused_add_rms_norm"] += 1
    return rmsnorm.fused_add_rms_norm(x, residual, weight, eps, gemma)


@fused_add_rms_norm.register_fake
def _fused_add_rms_norm_fake(x, residual, weight, eps, gemma):
    return (
        torch.empty_like(x, memory_format=torch.contiguous_format),
        torch.empty_like(residual, memory_format=torch.contiguous_format),
    )


@torch.library.custom_op("vosti::qk_rms_norm", mutates_args=())
def qk_rms_norm(qk: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, num_q_heads: int, eps: float,
                gemma: bool) -> torch.Tensor:
    if forward_counters.counts is not None:
        forward_counters.counts["qk_rms_norm"] += 1
    return rmsnorm.qk_rms_norm(qk, q_weight, k_weight, num_q_heads, eps, gemma)


@qk_rms_norm.register_fake
def _qk_rms_norm_fake(qk, q_weight, k_weight, num_q_heads, eps, gemma):
    return torch.empty_like(qk, memory_format=torch.contiguous_format)


@torch.library.custom_op("vosti::norm_add_rms_norm", mutates_args=())
def norm_add_rms_norm(
    x: torch.Tensor, weight0: torch.Tensor, eps0: float, residual: torch.Tensor, weight: torch.Tensor, eps: float,
    gemma: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    if forward_counters.counts is not None:
        forward_counters.counts["norm_add_rms_norm"] += 1
    return rmsnorm.norm_add_rms_norm(x, weight0, eps0, residual, weight, eps, gemma)


@norm_add_rms_norm.register_fake
def _norm_add_rms_norm_fake(x, weight0, eps0, residual, weight, eps, gemma):
    return (
        torch.empty_like(x, memory_format=torch.contiguous_format),
        torch.empty_like(residual, memory_format=torch.contiguous_format),
    )


@torch.library.custom_op("vosti::act_and_mul", mutates_args=())
def act_and_mul(x: torch.Tensor, act: str) -> torch.Tensor:
    """act is "silu" or "gelu_tanh"."""
    if forward_counters.counts is not None:
        forward_counters.counts["act_and_mul"] += 1
    return activation.silu_and_mul(x) if act == "silu" else activation.gelu_tanh_and_mul(x)


@act_and_mul.register_fake
def _act_and_mul_fake(x, act):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
