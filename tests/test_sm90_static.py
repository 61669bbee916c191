"""The static sm_90 profile: vosti's launches compiled for the H200 on this CPU (real Triton, no GPU)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vosti_plugin.integration.sm90_static import occupancy


def test_occupancy_follows_the_sm90_limits():
    # 255 registers on 4 warps: 8192 registers a warp, 8 warps an SM
    assert occupancy(255, 80 * 1024, 4) == {"ctas_per_sm": 2, "bound_by": "registers", "warps_per_sm": 8}
    # 8 warps at 255: one CTA
    assert occupancy(255, 160 * 1024, 8)["ctas_per_sm"] == 1
    # shared memory: 96 KB + the 1 KB each CTA reserves, twice in 228 KB
    assert occupancy(96, 96 * 1024, 4) == {"ctas_per_sm": 2, "bound_by": "shared", "warps_per_sm": 8}
    # tiny one-warp kernels: the 32-CTA limit
    assert occupancy(40, 0, 1) == {"ctas_per_sm": 32, "bound_by": "ctas", "warps_per_sm": 32}
    # 64 warps of threads: 2048 threads an SM
    assert occupancy(24, 0, 16) == {"ctas_per_sm": 4, "bound_by": "threads", "warps_per_sm": 64}


def _triton_has_nvidia() -> bool:
    import triton

    return "nvidia" in triton.backends.backends


@pytest.mark.slow
@pytest.mark.skipif(not _triton_has_nvidia(), reason="this Triton has no nvidia backend to compile for sm_90")
def test_a_geometry_compiles_for_the_h200_on_the_hopper_paths(tmp_path):
    """Every launch of a Qwen3-0.6B layer (and a variant's) is compiled for sm_90a through the plugin's own launch
    code; the attention and GEMM kernels take the Hopper paths (wgmma, cp.async or TMA) the speed relies on."""
    out = tmp_path / "sm90.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    proc = subprocess.run([sys.executable, "-m", "vosti_plugin.integration.sm90_static", "--geometries", "qwen3-0.6b",
                           "--variants", "tiles of 128 rows, 8 warps", "--gemm-block-m", "64", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert not [r for r in rows if "does_not_compile" in r]
    attention = [r for r in rows if r["kernel"] == "_paged_attention_segments_kernel"]
    cases = {r["case"] for r in attention}
    assert cases == {"prefill 2048 @ 8K", "prefill 2048 @ 8K fused", "decode b4 @ 8K",
                     "decode b4 @ 8K, 16-row decode tiles"}
    shipped_prefill = [r for r in attention if r["variant"] == "shipped" and r["case"].startswith("prefill")]
    assert shipped_prefill and all(r["hgmma"] > 0 and r["ldgsts"] > 0 for r in shipped_prefill)
    # the key-tile loops (whole tiles, masked tiles): each iteration issues its MMAs among the softmax's instructions
    assert all(len(r["mma_loops"]) >= 2 and all(0 < loop["mma"] < loop["instr"] for loop in r["mma_loops"])
               for r in shipped_prefill)
    assert {r["warps"] for r in attention if r["variant"] == "tiles of 128 rows, 8 warps"} == {8}
    assert all(0 < r["regs"] <= 255 and r["ctas_per_sm"] >= 1 for r in rows)
    gemms = [r for r in rows if r["kernel"].startswith("mm_") and r["variant"] == "shipped"]
    assert {r["case"].split()[0] for r in gemms} == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"}
    assert all(r["ldgsts"] > 0 or r["utmaldg"] > 0 for r in gemms)
    # prefill (tall path, 128-row tiles) runs wgmma; a decode launch in 16-row tiles runs mma.sync, below wgmma's 64
    assert all(r["hgmma"] > 0 for r in gemms if r["case"].endswith("M=2048"))
    decode = {r["case"]: r for r in gemms if r["case"].endswith("M=4")}
    sixteen = [c for c, r in decode.items() if r["hmma"] > 0]
    assert sixteen and all(decode[c]["hgmma"] == 0 for c in sixteen)
    # the same launches in 64-row tiles: wgmma, and operand stages that take more shared memory
    tall = {r["case"]: r for r in rows if r["kernel"].startswith("mm_") and r["variant"] == "64-row activation tiles"}
    assert set(tall) == set(decode)
    assert all(tall[c]["hgmma"] > 0 and tall[c]["shared_kb"] > decode[c]["shared_kb"] for c in sixteen)
    assert any(r["kernel"] == "_combine_segments_kernel" for r in rows)
