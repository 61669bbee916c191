"""`vosti bench` on CPU with real vLLM: each mode in its own process, a mode past its time limit is reported
and fails the command, GPU-only modes are skipped with the reason, and the report holds what did run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_bench_runs_each_mode_reports_it_and_fails_on_a_mode_past_its_limit(tmp_path):
    out = tmp_path / "bench"
    # on CPU, bi is skipped with its reason and vosti runs the whole grid
    proc = subprocess.run(
        [sys.executable, "-m", "vosti_plugin.cli", "bench", "--model", "tiny", "--modes", "vosti,bi",
         "--contexts", "0,64", "--batches", "1,2", "--decode-tokens", "2", "--max-model-len", "256", "--eager",
         "--repeats", "2", "--mode-timeout", "400", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "skipping bi" in text and "needs a CUDA GPU" in text
    result = json.loads((out / "tp_tiny_vosti.json").read_text())
    assert result["attention_impls"] == ["VostiAttentionImpl"]
    cells = {(r["batch"], r["context"]) for r in result["rows"]}
    assert cells == {(1, 0), (1, 64), (2, 0), (2, 64)}
    assert all(r["decode_method"] == "cached" and r["decode_tok_s"] > 0 for r in result["rows"])
    # each cell measured twice on fresh prompts; the row keeps the median and both samples
    for r in result["rows"]:
        assert r["repeats"] == 2 and len(r["prefill_s_samples"]) == len(r["decode_s_samples"]) == 2
        assert r["prefill_s"] == sum(r["prefill_s_samples"]) / 2 and r["decode_s"] == sum(r["decode_s_samples"]) / 2
    table = (out / "bench.md").read_text()
    assert "decode vosti" in table and (out / "decode_vs_context.png").stat().st_size > 0

    # a mode given too little time to start is stopped, reported, and fails the command
    failing = subprocess.run(
        [sys.executable, "-m", "vosti_plugin.cli", "bench", "--model", "tiny", "--modes", "default",
         "--contexts", "0", "--batches", "1", "--mode-timeout", "3", "--out", str(tmp_path / "late")],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert failing.returncode == 1
    assert "default failed" in failing.stdout and "stopped after 3 s" in failing.stdout


def test_bench_refuses_unknown_modes(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vosti_plugin.cli", "bench", "--modes", "vosti,fast",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "unknown mode(s) fast" in proc.stdout
