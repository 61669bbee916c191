"""Gated activations (SiLU for Llama / Qwen3, GELU-tanh for Gemma-3): row invariance, agreement with
fp64, and vLLM's SiluAndMul / GeluAndMul reaching the vosti kernel only while installed.

Why vosti owns them at all: PyTorch's CPU elementwise kernels are not bitwise row invariant for
gelu-tanh (measured on this 2-core machine: d = 1000 gives different bits at M = 33 than at M = 1,
because a thread's range ends in a scalar tail with another tanh)."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin import forward_counters
from vosti_plugin.ops import activation, install

ACTS = {"silu": activation.silu_and_mul, "gelu_tanh": activation.gelu_tanh_and_mul}


@pytest.fixture
def calls():
    """vosti's forward counters, on for this test (they are off by default)."""
    with forward_counters.counting() as counts:
        yield counts


@settings(max_examples=12)
@given(act=st.sampled_from(list(ACTS)), M=st.one_of(st.integers(1, 40), st.integers(41, 512)),
       d=st.sampled_from([256, 344, 1000, 1100]), seed=st.integers(0, 2**31 - 1))
def test_gated_activation_row_equals_single_row(act, M, d, seed):
    x = torch.randn(M, 2 * d, generator=torch.Generator().manual_seed(seed)) * 3
    full = ACTS[act](x)
    for row in sorted({0, M // 2, M - 1}):
        assert torch.equal(full[row], ACTS[act](x[row : row + 1].clone())[0])


def _reference(x: torch.Tensor, act: str) -> torch.Tensor:
    x = x.double()
    d = x.shape[-1] // 2
    a, b = x[..., :d], x[..., d:]
    if act == "silu":
        return a / (1 + torch.exp(-a)) * b
    return 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))) * b


@pytest.mark.parametrize("act", list(ACTS))
def test_gated_activation_matches_fp64_reference(act):
    # fp32 exp and a few fp32 roundings (act rounded once, product rounded once): 1e-6 relative to
    # |act| * |b| plus 1e-6 absolute (tanh via exp loses relative accuracy near u = 0).
    x = torch.randn(50, 2 * 300, generator=torch.Generator().manual_seed(1)) * 4
    got = ACTS[act](x).double()
    ref = _reference(x, act)
    assert ((got - ref).abs() <= 1e-6 * ref.abs() + 1e-6 * x[:, 300:].double().abs()).all(), (got - ref).abs().max()


@pytest.fixture(scope="module")
def vllm_acts():
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.activation import GeluAndMul, SiluAndMul

    with set_current_vllm_config(VllmConfig()):
        yield {"silu": SiluAndMul(), "gelu_tanh": GeluAndMul(approximate="tanh"), "gelu": GeluAndMul()}


@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_vllm_activation_uses_vosti_kernel_only_while_installed(vllm_acts, act, calls):
    x = torch.randn(7, 2 * 64)
    stock = vllm_acts[act](x)
    with install.installed():
        n = calls["act_and_mul"]
        ours = vllm_acts[act](x)
        assert calls["act_and_mul"] == n + 1
        assert torch.equal(ours, ACTS[act](x))
    n = calls["act_and_mul"]
    assert torch.equal(vllm_acts[act](x), stock) and calls["act_and_mul"] == n
    install.disable()


def test_exact_gelu_stays_stock(vllm_acts, calls):
    x = torch.randn(3, 16)
    with install.installed():
        n = calls["act_and_mul"]
        vllm_acts["gelu"](x)
        assert calls["act_and_mul"] == n
