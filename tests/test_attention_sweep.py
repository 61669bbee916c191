"""The offline attention sweep (integration/gpu/attention_sweep.py): its candidates are launchable configs,
its CPU smoke run times every (candidate, path, case) and its best candidates pass the invariance and
reference checks, and a spent time budget still leaves a JSON report."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from vosti_plugin.attention.config import (
    SUPPORTED_HEAD_DIMS,
    SUPPORTED_PAGE_SIZES,
    SUPPORTED_QUERIES_PER_KV,
    next_power_of_two,
    select_config,
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "integration" / "gpu" / "attention_sweep.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("attention_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention_sweep"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


sweep = _sweep_module()


def _run_smoke(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "sweep.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=240, env=env, cwd=ROOT,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


@given(
    head_dim=st.sampled_from(SUPPORTED_HEAD_DIMS),
    queries_per_kv=st.sampled_from(SUPPORTED_QUERIES_PER_KV),
    page_size=st.sampled_from(SUPPORTED_PAGE_SIZES),
    dtype=st.sampled_from((torch.bfloat16, torch.float16)),
    limit=st.integers(1, 60),
)
@example(head_dim=32, queries_per_kv=3, page_size=16, dtype=torch.bfloat16, limit=1)  # padded group
@example(head_dim=32, queries_per_kv=26, page_size=16, dtype=torch.bfloat16, limit=2)
def test_sweep_candidates_are_launchable_configs_led_by_the_shipped_one(head_dim, queries_per_kv, page_size, dtype,
                                                                         limit):
    geometry = sweep.Geometry("g", 4 * queries_per_kv, 4, head_dim, page_size)
    shipped = select_config(head_dim, geometry.q_heads, geometry.kv_heads, page_size, dtype)
    axes = sweep.gpu_plan(page_size, 8192, limit).axes
    configs = sweep.candidate_configs(geometry, dtype, shipped, axes, limit, gpu_constraints=True)

    assert configs[0] == shipped
    assert 1 <= len(configs) <= limit
    assert len({sweep.config_label(c) for c in configs}) == len(configs)  # results are keyed by label
    elem = torch.finfo(dtype).bits // 8
    for config in configs[1:]:
        # all query heads of a KV head in one tile, padded to a power of two
        assert config.block_m == config.block_q * next_power_of_two(queries_per_kv)
        assert config.queries_per_kv == queries_per_kv
        assert config.segment % config.block_n == 0  # the kernel's TILES_PER_SEGMENT
        for value in (config.block_m, config.block_n, config.segment):
            assert value & (value - 1) == 0
        assert config.block_m >= 16 and config.block_n >= 16  # tl.dot on a GPU
        assert elem * head_dim * (config.block_m + 2 * config.num_stages * config.block_n) <= 227 * 1024


@pytest.mark.slow
def test_cpu_smoke_sweep_times_every_candidate_and_its_best_configs_pass_checks(tmp_path):
    proc, data = _run_smoke(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not data["errors"]

    plan = sweep.smoke_plan(3)
    for geometry in plan.geometries:
        candidates = data["candidates"][geometry.name]
        assert len(candidates) == 3
        got = {(m["config"], m["path"], m["case"]) for m in data["measurements"]
               if m["geometry"] == geometry.name and "ms" in m}
        want = {(c, p, case.label) for c in candidates for p in sweep.PATHS for case in plan.cases}
        assert got == want
        checks = data["checks"][geometry.name]
        assert checks[0]["config"] == data["shipped"][geometry.name]["config"]
        assert sorted(c["config"] for c in checks) == sorted(candidates)  # smoke checks every candidate
        for check in checks:
            assert check["pass"], check
            assert check["bitwise_pairs"] == 8 and not check["bitwise_mismatches"]
            assert check["reference_max_abs_err"] < 2e-5
        # the cross-config comparison can tell bits apart: another segment size folds in another order
        cross = {c["b"]: c for c in data["cross_config"][geometry.name]}
        assert any(c["same_reduction_grid"] for c in cross.values())
        assert all(not c["bitwise_equal"] for c in cross.values() if not c["same_reduction_grid"])
        assert any(not c["same_reduction_grid"] for c in cross.values())
        best = [row for row in data["summary"]["best_per_case"] if row["geometry"] == geometry.name]
        assert {row["case"] for row in best} == {case.label for case in plan.cases}
    for case in plan.cases:
        if case.kind == "prefill":
            assert all(f"{g.name}/{case.label}" in data["sdpa"] for g in plan.geometries)
    assert "=== attention sweep" in proc.stdout and "[PASS] check" in proc.stdout


def test_spent_budget_stops_the_sweep_and_still_writes_the_report(tmp_path):
    proc, data = _run_smoke(tmp_path, "--budget-s", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert data["progress"] == "0"
    assert data["measurements"] == []
    assert all(c["error"] == "skipped: time budget" for checks in data["checks"].values() for c in checks)
    assert "wall_s" in data and "summary" in data
    assert "time budget reached" in proc.stdout


def test_extra_configs_come_right_after_the_shipped_one_when_launchable():
    geometry = sweep.Geometry("llama-like", 32, 8, 128, 64)
    shipped = select_config(128, 32, 8, 64, torch.bfloat16)
    axes = sweep.gpu_plan(64, 8192, 40).axes
    wanted = ("m64 n128 s256 w4 st2", "m8 n64 s512 w4 st2", "m16 n128 s128 w8 st2")  # m8: below tl.dot's 16
    configs = sweep.candidate_configs(geometry, torch.bfloat16, shipped, axes, 40, gpu_constraints=True,
                                      extra=wanted)
    labels = [sweep.config_label(c) for c in configs]
    assert labels[:3] == [sweep.config_label(shipped), wanted[0], wanted[2]]
    assert wanted[1] not in labels


@pytest.mark.parametrize("label", ["m64 n128 s256 w4 st2", "m16 n32 s1024 w8 st3"])
def test_config_labels_parse_back(label):
    geometry = sweep.Geometry("g", 8, 4, 256, 64)
    assert sweep.config_label(sweep.make_config(geometry, **sweep.parse_label(label))) == label


@pytest.mark.parametrize("label", ["m64 n128 s256 w4", "m64 x128 s256 w4 st2", "m64 n s256 w4 st2"])
def test_bad_config_labels_are_refused(label):
    with pytest.raises(ValueError, match="bad config label"):
        sweep.parse_label(label)
