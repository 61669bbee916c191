"""Installing the dense ops really reroutes torch and vLLM dispatch, and disabling really restores it."""
import pytest
import torch

from vosti_plugin import forward_counters
from vosti_plugin.ops import install


@pytest.fixture(autouse=True)
def _always_disabled_after():
    yield
    install.disable()


@pytest.fixture
def calls():
    """vosti's forward counters, on for this test (they are off by default)."""
    with forward_counters.counting() as counts:
        yield counts


@pytest.mark.skipif(forward_counters.counts is not None, reason=f"{forward_counters.ENV}=1 turns them on")
def test_forward_counters_are_off_unless_asked_for():
    with install.installed(vllm=False):
        torch.mm(torch.randn(3, 4), torch.randn(4, 2))
    assert forward_counters.counts is None
    with forward_counters.counting() as outer:
        with install.installed(vllm=False), forward_counters.counting() as inner:
            torch.mm(torch.randn(3, 4), torch.randn(4, 2))
        assert inner["mm"] == 1 and outer["mm"] == 1, "a block's counts reach the enclosing block"
    assert forward_counters.counts is None


def _ops_under_test():
    g = torch.Generator().manual_seed(0)
    a, b, bias = torch.randn(9, 16, generator=g), torch.randn(16, 8, generator=g), torch.randn(8, generator=g)
    return {
        "mm": lambda: torch.mm(a, b),
        "addmm": lambda: torch.addmm(bias, a, b),
        "log_softmax": lambda: a.log_softmax(dim=-1, dtype=torch.float32),
        "softmax": lambda: a.softmax(dim=-1),
        "mean": lambda: a.mean(dim=-1),
    }


@pytest.mark.parametrize("name", ["mm", "addmm", "log_softmax", "softmax", "mean"])
def test_aten_op_goes_through_vosti_only_while_installed(name, calls):
    run = _ops_under_test()[name]
    stock = run()
    before = calls[name]
    with install.installed(vllm=False):
        ours = run()
        assert calls[name] == before + 1, f"torch {name} did not reach the vosti kernel"
    after = run()
    assert calls[name] == before + 1, f"torch {name} still reaches vosti after disable"
    assert torch.equal(after, stock), "stock result must come back bit for bit"
    assert torch.allclose(ours, stock, rtol=1e-5, atol=1e-5)


def test_linear_layers_reach_the_kernel_through_addmm_and_mm(calls):
    x3, w, bias = torch.randn(2, 5, 16), torch.randn(8, 16), torch.randn(8)
    with install.installed(vllm=False):
        n = calls["addmm"] + calls["mm"]
        y = torch.nn.functional.linear(x3, w, bias)
        torch.nn.functional.linear(x3[0], w)
        assert calls["addmm"] + calls["mm"] >= n + 2
    assert torch.allclose(y, torch.nn.functional.linear(x3, w, bias), atol=1e-5)


def test_unsupported_inputs_fall_back_to_stock_results(calls):
    a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    stock_mm, stock_mean = torch.mm(a, b), a.mean(dim=0)
    with install.installed(vllm=False):
        n = sum(calls.values())
        assert torch.equal(torch.mm(a, b), stock_mm)
        assert torch.equal(a.mean(dim=0), stock_mean)
        assert sum(calls.values()) == n


def test_enable_is_idempotent_and_disable_restores(calls):
    install.enable(vllm=False)
    install.enable(vllm=False)
    assert install.is_enabled()
    install.disable()
    assert not install.is_enabled()
    n = calls["mm"]
    torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    assert calls["mm"] == n


# ------------------------------------------------------------------------- vLLM layer hooks


@pytest.fixture(scope="module")
def vllm_layers():
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.layernorm import GemmaRMSNorm, RMSNorm
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    with set_current_vllm_config(VllmConfig()):
        yield dict(RMSNorm=RMSNorm, GemmaRMSNorm=GemmaRMSNorm, config=set_current_vllm_config,
                   UnquantizedLinearMethod=UnquantizedLinearMethod,
                   UnquantizedEmbeddingMethod=UnquantizedEmbeddingMethod)


def _stock_attrs(v):
    names = [(v["RMSNorm"], "forward"), (v["GemmaRMSNorm"], "forward"),
             (v["UnquantizedLinearMethod"], "apply"), (v["UnquantizedLinearMethod"], "process_weights_after_loading"),
             (v["UnquantizedEmbeddingMethod"], "apply")]
    return {(c.__name__, n): (c.__dict__.get(n), getattr(c, n)) for c, n in names}


def test_vllm_norms_use_vosti_kernels_only_while_installed(vllm_layers, calls):
    from vosti_plugin.ops import rmsnorm

    stock = _stock_attrs(vllm_layers)
    norm = vllm_layers["RMSNorm"](128, eps=1e-5)
    gemma = vllm_layers["GemmaRMSNorm"](128, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(128))
        gemma.weight.copy_(torch.randn(128) * 0.1)
    x, res = torch.randn(7, 128), torch.randn(7, 128)
    stock_out = norm(x)
    with install.installed():
        n = calls["rms_norm"], calls["fused_add_rms_norm"]
        out = norm(x)
        out2, res2 = norm(x, res)
        g = gemma(x)
        assert calls["rms_norm"] == n[0] + 2 and calls["fused_add_rms_norm"] == n[1] + 1
        assert torch.equal(out, rmsnorm.rms_norm(x, norm.weight.data, 1e-5))
        assert torch.equal(g, rmsnorm.rms_norm(x, gemma.weight.data, 1e-6, gemma=True))
        assert torch.equal(res2, x + res)
        assert torch.equal(out2, rmsnorm.rms_norm(x + res, norm.weight.data, 1e-5))
    n = calls["rms_norm"]
    assert torch.equal(norm(x), stock_out) and calls["rms_norm"] == n
    assert _stock_attrs(vllm_layers) == stock, "vLLM classes must get their own methods back"


def test_vllm_linear_keeps_plain_weight_and_uses_vosti_kernel(vllm_layers, calls):
    from vosti_plugin.ops import matmul

    method = vllm_layers["UnquantizedLinearMethod"]()
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(torch.randn(96, 128), requires_grad=False)
    x = torch.randn(5, 128)
    with install.installed():
        method.process_weights_after_loading(layer)
        assert layer.weight.shape == (96, 128), "CPU packing must not drop the weight under vosti"
        n = calls["linear"]
        y = method.apply(layer, x)
        assert calls["linear"] == n + 1
        assert torch.equal(y, matmul.linear(x, layer.weight))
    # after disable the stock apply runs on the plain fallback the hook left behind
    n = calls["linear"]
    y_stock = method.apply(layer, x)
    assert calls["linear"] == n
    assert torch.allclose(y_stock, y, atol=1e-5)


def test_install_refuses_cpu_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        install.enable(device_type="cpu", vllm=False)
    assert not install.is_enabled()


_QUIET_INSTALL = """
import logging, warnings
warnings.simplefilter("always")
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
from vosti_plugin.ops import install
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    install.enable(device_type="cpu", vllm=False)
print("WARNINGS", [str(w.message).strip()[:60] for w in caught])
"""


def test_install_says_once_what_it_overrides_instead_of_torchs_override_warning():
    """torch warns once per process, in a dozen lines, that aten kernels are overridden (a fresh process, so
    the warning has not been spent yet); vosti logs one line naming the ops instead."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _QUIET_INSTALL], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNINGS []" in proc.stdout
    assert "overridden" not in proc.stderr
    assert "vosti: aten mm, addmm, _softmax, _log_softmax and mean.dim on CPU run vosti's batch-invariant" in proc.stderr
