"""The `autotune` launch fact is read from the kernels vosti launches, so `no-autotuning` can fail: a
kernel module with a run-time autotuner makes the real facts of a real vLLM config fail the check."""
from __future__ import annotations

import sys
import textwrap

import pytest

from vosti_plugin.launch import autotuning
from vosti_plugin.launch.check import run_check

KERNELS = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
    @triton.jit
    def timed_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    @triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
    @triton.jit
    def pinned_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    @triton.jit
    def plain_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')


@pytest.fixture
def autotuned_module(tmp_path, monkeypatch):
    (tmp_path / "vosti_test_autotuned_kernels.py").write_text(KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "vosti_test_autotuned_kernels"
    sys.modules.pop("vosti_test_autotuned_kernels", None)


def test_shipped_kernels_do_not_autotune():
    assert autotuning.autotuned_kernels() == []


def test_only_a_run_time_autotuner_counts(autotuned_module):
    assert autotuning.autotuned_kernels([autotuned_module]) == [f"{autotuned_module}.timed_copy"]


def test_no_autotuning_fails_from_the_facts_of_a_real_config(autotuned_module, monkeypatch, tiny_model_path):
    pytest.importorskip("vllm")
    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.launch.offline import build_vllm_config

    config = build_vllm_config(tiny_model_path, ["--dtype", "float32", "--max-model-len", "256"])
    stock_facts = facts_from_vllm_config(config)
    assert stock_facts.autotune is False
    assert "no-autotuning" not in {f.obligation for f in run_check(stock_facts)}

    monkeypatch.setattr(autotuning, "KERNEL_MODULES", autotuning.KERNEL_MODULES + (autotuned_module,))
    facts = facts_from_vllm_config(config)
    assert facts.autotune is True
    assert facts.extra["autotuned_kernels"] == [f"{autotuned_module}.timed_copy"]
    (failure,) = [f for f in run_check(facts) if f.obligation == "no-autotuning"]
    assert f"{autotuned_module}.timed_copy" in failure.reason
