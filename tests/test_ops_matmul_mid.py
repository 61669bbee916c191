"""The mid GEMM path (on unless VOSTI_MID_GEMM=0): launches of MID_MIN_ROWS rows up to the tall path's run the decode
config in 64-row tiles, with the decode config's K order, so every row keeps the bits it has decoded alone.

CPU runs the kernels through the Triton interpreter in fp32 (see conftest); whether the H200's MMA keeps these
bits across tile heights is what integration/gpu/decode_gemm_sweep.py --block-m 16,64 measured, and what the
startup probe checks on the deployment's GPU."""
import dataclasses

import pytest
import torch

from test_ops_matmul import _operands
from test_ops_matmul_tall import _LaunchLog
from vosti_plugin.ops import matmul

SMEM_BYTES = 227 * 1024   # an H100/H200 SM's shared memory a CTA may use


@pytest.mark.parametrize("setting, M, on", [
    (None, matmul.MID_MIN_ROWS, True), (None, matmul.MID_MIN_ROWS - 1, False), ("0", 300, False),
    ("1", matmul.MID_MIN_ROWS - 1, False), ("1", matmul.MID_MIN_ROWS, True), ("1", matmul.TALL_MIN_ROWS - 1, True)])
def test_mid_path_is_on_by_default_and_starts_at_its_row_count(monkeypatch, setting, M, on):
    if setting is None:
        monkeypatch.delenv("VOSTI_MID_GEMM", raising=False)
    else:
        monkeypatch.setenv("VOSTI_MID_GEMM", setting)
    assert matmul.mid_path_on(M) is on


@pytest.mark.parametrize("config, dtype", matmul.rule_configs())
def test_mid_configs_keep_the_decode_k_order_and_fit_in_shared_memory(config, dtype):
    mid = matmul.mid_config(config)
    assert mid.block_m == max(64, config.block_m)
    assert dataclasses.replace(mid, block_m=config.block_m) == config, "only the tile height may change"
    assert mid.k_per_split(4096 + 96) == config.k_per_split(4096 + 96)
    stage_bytes = (mid.block_m + mid.block_n) * mid.block_k * 2 * mid.num_stages
    assert stage_bytes <= SMEM_BYTES, (mid, stage_bytes)


@pytest.mark.parametrize("N, K", [(96, 200), (130, 520)])
def test_mid_launches_give_every_row_its_decoded_bits(monkeypatch, N, K):
    """Below MID_MIN_ROWS rows a launch runs the decode config; from MID_MIN_ROWS rows the mid tiles, and each row
    equals the same row decoded alone."""
    a, w, bias = _operands(3, matmul.MID_MIN_ROWS + 41, N, K, with_bias=True)
    config = matmul.select_config(N, K, torch.float32)
    assert matmul.mid_config(config) != config, "the CPU config must have shorter tiles for this to test anything"
    monkeypatch.delenv("VOSTI_TALL_GEMM", raising=False)   # off for fp32: the rows below stay off the tall path
    monkeypatch.setenv("VOSTI_MID_GEMM", "1")
    log = _LaunchLog(monkeypatch)
    below = matmul.linear(a[: matmul.MID_MIN_ROWS - 1], w, bias)
    batch = matmul.linear(a, w, bias)
    alone = torch.cat([matmul.linear(a[x: x + 1], w, bias) for x in (0, 63, 64, matmul.MID_MIN_ROWS + 40)])
    assert [c[1:] for c in log.calls[:2]] == [(matmul.MID_MIN_ROWS - 1, config),
                                              (matmul.MID_MIN_ROWS + 41, matmul.mid_config(config))]
    assert torch.equal(batch[: matmul.MID_MIN_ROWS - 1], below), "rows must not notice the path switch"
    assert torch.equal(batch[[0, 63, 64, matmul.MID_MIN_ROWS + 40]], alone)


def test_the_verifier_catalog_holds_every_mid_config_and_its_cross_proof():
    entries = {e["kernel"].fn.__name__: e for e in matmul.verifier_catalog()}
    families = {name: [fam for _cfg, fam in e["configs"]] for name, e in entries.items()}
    crossed = {(left["BLOCK_M"], left["BLOCK_N"], right["BLOCK_M"], right["BLOCK_N"], right["BLOCK_K"])
               for left, right, _fam in entries["mm_kernel"]["cross"]}
    checked = 0
    for config, _dtype in matmul.rule_configs():
        mid = matmul.mid_config(config)
        if mid == config:
            continue
        kernel = "mm_kernel" if config.split_k == 1 else "mm_splitk_partial_kernel"
        assert dataclasses.asdict(mid) in families[kernel], mid
        if config.split_k == 1:
            assert (mid.block_m, mid.block_n, config.block_m, config.block_n, config.block_k) in crossed, mid
        checked += 1
    assert checked >= 10


def test_mid_configs_leave_the_checked_launch_set_when_turned_off(monkeypatch):
    from test_launch_obligations import GOOD
    from vosti_plugin.launch.verified import kernel_configs_for

    monkeypatch.setenv("VOSTI_MID_GEMM", "0")
    assert not any(name.endswith("/mid") for name in kernel_configs_for(GOOD))
    monkeypatch.delenv("VOSTI_MID_GEMM")
    mid = {name: cfg for name, cfg in kernel_configs_for(GOOD).items() if name.endswith("/mid")}
    assert len(mid) == 5 and all(cfg["block_m"] == 64 for cfg in mid.values())


def test_paths_report_gives_each_path_against_decode_and_cublas_and_names_unequal_rows():
    from integration.gpu import decode_gemm_sweep as sweep

    def shape(n, decode, mid, tall, cublas, mid_equal=True):
        us = {"decode": {"64": decode, "256": 4 * decode}, "mid": {"64": mid, "256": 6 * mid},
              "tall": {"64": tall, "256": tall}, "cublas": {"64": cublas, "256": cublas}}
        return {"N": n, "K": 1024, "us": us,
                "bits_equal_decode": {"mid": mid_equal, "tall": True}}

    results = [shape(1024, 20.0, 10.0, 40.0, 10.0), shape(2048, 20.0, 10.0, 40.0, 10.0, mid_equal=False)]
    m64, m256, unequal = sweep.paths_report(results, [64, 256])
    assert "mid 0.50x decode, 1.00x cuBLAS, fastest on 2" in m64 and "tall 2.00x decode" in m64
    assert "tall 0.50x decode, 4.00x cuBLAS, fastest on 2" in m256
    assert "mid 0.75x decode, 6.00x cuBLAS, fastest on 0" in m256
    assert "decode 1.00x decode, 8.00x cuBLAS, fastest on 0" in m256
    assert unequal == "rows unequal to the decode rows: 2048x1024 mid (2 shapes)"
