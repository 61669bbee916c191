"""Programmatic dependent launch (vosti_plugin/ops/dependent_launch.py): off wherever it cannot run; the kernels of
a decode step take its gate and open with the wait the verifier drops; on an sm90+ GPU a step of those launches,
replayed as a CUDA graph, gives with it the bits it gives without it."""
import ast
import inspect
import textwrap

import pytest
import torch

from vosti_plugin.ops import dependent_launch
from vosti_plugin.verifier.api import catalog_entries
from vosti_plugin.verifier.frontend import DEPENDENCY_WAIT_FLAG, kernel_from_function

# every kernel a decode or prefill step launches (the sampler's kernels run once a step, after the lm_head)
STEP_KERNELS = {"rms_norm_kernel", "norm_add_rms_norm_kernel", "act_and_mul_kernel", "mm_kernel",
                "mm_splitk_partial_kernel", "splitk_combine_kernel", "mm_tall_kernel", "mm_tall_tma_kernel",
                "mm_tall_tma_cols_kernel", "_write_kv_kernel", "_paged_attention_segments_kernel",
                "_combine_segments_kernel"}


def test_tensors_off_a_cuda_device_launch_without_it(monkeypatch):
    monkeypatch.delenv(dependent_launch.ENV, raising=False)
    assert dependent_launch.enabled(torch.zeros(2)) is False


def test_every_step_kernel_opens_with_the_gated_wait_and_proves_without_it():
    kernels = {e["kernel"].fn.__name__: e["kernel"] for e in catalog_entries()}
    gated = {name for name, k in kernels.items() if DEPENDENCY_WAIT_FLAG in inspect.signature(k.fn).parameters}
    assert gated == STEP_KERNELS
    for name in sorted(gated):
        fdef = ast.parse(textwrap.dedent(inspect.getsource(kernels[name].fn))).body[0]
        first = fdef.body[1] if isinstance(fdef.body[0], ast.Expr) and isinstance(fdef.body[0].value, ast.Constant) \
            else fdef.body[0]
        assert ast.unparse(first) == "if PDL:\n    tl.extra.cuda.gdc_wait()", (name, ast.unparse(first))
        translated = kernel_from_function(kernels[name])
        assert DEPENDENCY_WAIT_FLAG not in {p.name for p in translated.params}, name


@pytest.mark.gpu
def test_a_step_gives_the_same_bits_with_it_as_without(monkeypatch):
    if torch.cuda.get_device_capability()[0] < dependent_launch.MIN_CAPABILITY:
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    from vosti_plugin.ops.activation import silu_and_mul
    from vosti_plugin.ops.matmul import linear
    from vosti_plugin.ops.rmsnorm import fused_add_rms_norm

    gen = torch.Generator(device="cuda").manual_seed(0)
    hidden, inter, layers = 1024, 3072, 8
    weights = [(torch.randn(2 * inter, hidden, generator=gen, device="cuda").bfloat16() / 32,
                torch.randn(hidden, inter, generator=gen, device="cuda").bfloat16() / 55) for _ in range(layers)]
    gain = torch.randn(hidden, generator=gen, device="cuda").bfloat16()
    x0 = torch.randn(4, hidden, generator=gen, device="cuda").bfloat16()
    out = {}

    def step():
        x, residual = x0, torch.zeros_like(x0)
        for w_up, w_down in weights:
            h, residual = fused_add_rms_norm(x, residual, gain, 1e-6)
            x = linear(silu_and_mul(linear(h, w_up)), w_down)
        out["x"], out["residual"] = x, residual

    results = {}
    for flag in ("0", "1"):
        monkeypatch.setenv(dependent_launch.ENV, flag)
        step()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        graph.replay()
        torch.cuda.synchronize()
        results[flag] = (out["x"].clone(), out["residual"].clone())
    assert results["0"][0].abs().max() > 0
    assert all(torch.equal(a, b) for a, b in zip(results["0"], results["1"]))
