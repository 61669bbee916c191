"""integration/gpu/pdl_chain.py --cpu-smoke: the decode-step script behind the dependent-launch numbers runs end to
end through the interpreter (Qwen3-0.6B's layer shapes, two layers) and reports a time and an output digest."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "integration" / "gpu" / "pdl_chain.py"


@pytest.mark.slow
def test_cpu_smoke_times_the_step_and_digests_its_outputs(tmp_path):
    out = tmp_path / "pdl.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["model"], row["layers"], row["batch"]) == ("qwen3-0.6b", 2, 1)
    assert set(row["us"]) == {"no pdl"} and row["us"]["no pdl"] > 0
    assert len(row["digest"]["no pdl"]) == 16 and row["bits_equal_no_pdl"] == {"no pdl": True}
    assert "errors" not in row
