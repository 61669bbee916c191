"""integration/gpu/decode_layer_parts.py --cpu-smoke: the H200 decode-step breakdown script runs end to end
through the interpreter on a tiny geometry (window and global layers, q/k norms, Gemma norms) and reports
every part it times, the whole layers and the step they add up to."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "integration" / "gpu" / "decode_layer_parts.py"


@pytest.mark.slow
def test_cpu_smoke_reports_every_part_layer_and_the_step(tmp_path):
    out = tmp_path / "decode.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    parts = summary["parts_us"]
    assert {f"gemm_{g}" for g in ("qkv", "o", "gate_up", "down")} | {
        "attention_window", "attention_global", "attention_window_sdpa_dense",
        "attention_global_sdpa_dense", "input_norm", "qk_norm", "qk_norm_one_launch", "qk_norm_copied", "post_norm",
        "post_norm_fp32_weight", "norm_pair_one_launch", "norm_pair_two_launches", "kv_write", "activation"} == set(parts)
    assert summary["checks"] == {"norm_pair_bits_equal_two_launches": True, "qk_norm_bits_equal_two_launches": True}
    timings = [t for p in parts.values() for t in (p.values() if isinstance(p, dict) else [p])]
    timings += [t for layer in summary["layer_us"].values() for t in layer.values()]
    assert all(t > 0 for t in timings)
    assert set(summary["layer_us"]) == {"window", "global"} == set(summary["layers"])
    assert summary["step_us"]["vosti"] == round(sum(summary["layer_us"][k]["vosti"] * n
                                                    for k, n in summary["layers"].items()), 1)
