"""Triton's interpreter computes masked-off lanes too; in vosti's kernels those lanes hold -inf - -inf and
numpy warns although nothing uses them. vosti quiets that inside its own kernel launches only: the same
arithmetic in another interpreted kernel, or in numpy, still warns."""
import warnings

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from vosti_plugin import interpreter_warnings
from vosti_plugin.triton_mode import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="the warnings come from Triton's CPU interpreter")


@triton.jit
def _masked_lanes_not_vosti(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf"))
    tl.store(out_ptr + offs, x - x, mask=offs < n)      # -inf - -inf on the masked lanes


def _runtime_warnings(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _vosti_attention_with_masked_rows():
    from vosti_plugin.attention.config import AttentionLaunchConfig
    from vosti_plugin.attention.paged_batch import build_paged_batch, random_request, run_paged_batch

    # 3 query tokens in 2-token row blocks: the second block has a masked row (all scores -inf). A sliding
    # window (wider than the sequence) keeps every tile on the masked path: without one, a block's whole tiles
    # come first and give the masked row finite scores.
    config = AttentionLaunchConfig(block_q=2, block_m=4, block_n=4, segment=8, num_warps=4, num_stages=1)
    batch = build_paged_batch([random_request(5, 3, 4, 2, 16, seed=0)], page_size=4)
    return lambda: run_paged_batch(batch, config, scale=0.25, sliding_window=16)


def _other_kernel():
    x, out = torch.zeros(8), torch.empty(8)
    return lambda: _masked_lanes_not_vosti[(1,)](x, out, 5, BLOCK=8)


def test_vosti_kernel_masked_lanes_are_quiet_and_other_warnings_are_not(monkeypatch):
    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setattr(InterpretedFunction, "run", InterpretedFunction.run)   # undone after the test
    vosti_launch, other_launch = _vosti_attention_with_masked_rows(), _other_kernel()
    if getattr(InterpretedFunction.run, "_vosti_quiet", False):
        monkeypatch.setattr(InterpretedFunction, "run", InterpretedFunction.run.__wrapped__)
    assert any("invalid value" in m for m in _runtime_warnings(vosti_launch)), "the case must warn unquieted"

    assert interpreter_warnings.install()
    assert interpreter_warnings.install(), "install is idempotent"
    assert _runtime_warnings(vosti_launch) == []
    assert any("invalid value encountered in subtract" in m for m in _runtime_warnings(other_launch))
    inf = np.array([np.inf])
    assert any("invalid value" in m for m in _runtime_warnings(lambda: inf - inf)), "numpy outside still warns"
