"""Mode switches that must be set before vLLM starts: what each bench/harness mode puts in the environment."""
import os

import pytest

from vosti_plugin.integration.bench import modes as bench_modes
from vosti_plugin.integration.harness import engine as harness_engine


@pytest.mark.parametrize("mode", bench_modes.MODES)
def test_bench_mode_sets_tall_gemm_only_for_vosti_tall(mode, monkeypatch):
    for name in ("VOSTI_TALL_GEMM", "VOSTI_TMA_GEMM", "VLLM_BATCH_INVARIANT", "VOSTI_SPLIT_WORKSPACE_SHARE",
                 "VOSTI_EAGER_STEP_GRID", "VOSTI_DECODE_TILE_ROWS", "VOSTI_ATTENTION_ROW_SUMS",
                 "VOSTI_PREFILL_FUSED_FROM", "VOSTI_MID_GEMM", "VOSTI_TMA_COLS_GEMM",
                 "VOSTI_DEPENDENT_LAUNCH"):   # set first so monkeypatch restores the original
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)
    bench_modes.prepare_environment(mode)
    assert (os.environ.get("VOSTI_TALL_GEMM") == "1") == (mode == "vosti-tall")
    assert (os.environ.get("VLLM_BATCH_INVARIANT") == "1") == (mode == "bi")
    assert os.environ.get("VOSTI_TMA_GEMM") == {"vosti-tma": "1", "vosti-pointer": "0"}.get(mode)
    assert os.environ.get("VOSTI_SPLIT_WORKSPACE_SHARE") == ("0" if mode == "vosti-nostretch" else None)
    assert os.environ.get("VOSTI_EAGER_STEP_GRID") == {"vosti-step-grid": "1", "vosti-model-grid": "0"}.get(mode)
    assert os.environ.get("VOSTI_DECODE_TILE_ROWS") == {"vosti-decode16": "16", "vosti-dot16": "16",
                                                        "vosti-sum64": "0"}.get(mode)
    assert os.environ.get("VOSTI_ATTENTION_ROW_SUMS") == {"vosti-decode16": "sum", "vosti-dot16": "dot",
                                                          "vosti-sum64": "sum"}.get(mode)
    assert os.environ.get("VOSTI_PREFILL_FUSED_FROM") == {"vosti-fused-prefill": "512",
                                                          "vosti-split-prefill": "0"}.get(mode)
    assert os.environ.get("VOSTI_MID_GEMM") == {"vosti-mid-gemm": "1", "vosti-no-mid-gemm": "0"}.get(mode)
    assert os.environ.get("VOSTI_DEPENDENT_LAUNCH") == ("1" if mode == "vosti-pdl" else None)
    assert os.environ.get("VOSTI_TMA_COLS_GEMM") == ("0" if mode == "vosti-tma-groups" else None)
    kw = bench_modes.engine_kwargs(mode)
    assert (kw.get("attention_backend") == "vosti") == mode.startswith("vosti")


def test_harness_tall_mode_sets_env_and_is_gpu_only(monkeypatch):
    monkeypatch.delenv("VOSTI_TALL_GEMM", raising=False)
    mode = harness_engine.get_mode("vosti-tall")
    assert mode.vosti and mode.env == {"VOSTI_TALL_GEMM": "1"}
    monkeypatch.setattr(harness_engine, "has_gpu", lambda: False)
    assert "tall GEMM" in harness_engine.unavailable_reason(mode)
    monkeypatch.setattr(harness_engine, "has_gpu", lambda: True)
    assert harness_engine.unavailable_reason(mode) is None


def test_harness_mid_gemm_mode_sets_the_mid_row_switch_and_runs_on_cpu():
    mode = harness_engine.get_mode("vosti-mid-gemm")
    assert mode.vosti and mode.env == {"VOSTI_MID_GEMM": "1"} and not mode.gpu_only


def test_harness_decode16_mode_sets_the_decode_tile_switch():
    mode = harness_engine.get_mode("vosti-decode16")
    assert mode.vosti and mode.env == {"VOSTI_DECODE_TILE_ROWS": "16", "VOSTI_ATTENTION_ROW_SUMS": "sum"}
    assert not mode.gpu_only
    assert harness_engine.get_mode("vosti-sum64").env == {"VOSTI_DECODE_TILE_ROWS": "0", "VOSTI_ATTENTION_ROW_SUMS": "sum"}


def test_harness_dot16_mode_sets_both_attention_switches():
    mode = harness_engine.get_mode("vosti-dot16")
    assert mode.vosti and not mode.gpu_only
    assert mode.env == {"VOSTI_DECODE_TILE_ROWS": "16", "VOSTI_ATTENTION_ROW_SUMS": "dot"}
