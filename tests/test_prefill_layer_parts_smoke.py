"""integration/gpu/prefill_layer_parts.py --cpu-smoke: the H200 prefill-step breakdown script runs end to end
through the interpreter on a tiny geometry (window and global layers) and reports every part it times."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "integration" / "gpu" / "prefill_layer_parts.py"


@pytest.mark.slow
def test_cpu_smoke_reports_every_gemm_attention_path_and_the_step(tmp_path):
    out = tmp_path / "parts.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert set(summary["per_layer_ms"]["gemm"]) == {"qkv", "o", "gate_up", "down"}
    assert set(summary["per_layer_ms"]["attention"]) == {"window_split", "window_fused", "global_split",
                                                         "global_fused"}
    timings = [t for g in summary["per_layer_ms"]["gemm"].values() for t in g.values()]
    timings += list(summary["per_layer_ms"]["attention"].values()) + list(summary["step_ms"].values())
    timings.append(summary["per_layer_ms"]["other_ops"])
    assert all(t["gpu"] > 0 and t["host"] > 0 for t in timings)
    assert set(summary["step_tok_s"]) == {"vosti", "cublas_gemms", "vosti_all_ops"} and all(v > 0 for v in summary["step_tok_s"].values())
