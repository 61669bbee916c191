"""The determinism certificate reaches vLLM's log, in vLLM's format, in a fresh process (the same
check_launch_or_raise that runs when the engine config is built; vLLM's config, no engine started)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vosti_plugin.launch.check import CERTIFICATE_LOG_PREFIX

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import sys
from vosti_plugin.launch.check import check_launch_or_raise
from vosti_plugin.launch.offline import build_vllm_config
from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

ensure_interpreter_without_gpu()
check_launch_or_raise(build_vllm_config(sys.argv[1], ["--dtype", "float32"]), certificate_path=sys.argv[2])
"""


def test_certificate_line_is_in_vllms_log_and_equals_the_file(tiny_model_path, tmp_path):
    cert_path = tmp_path / "cert.json"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, tiny_model_path, str(cert_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    log = proc.stdout + proc.stderr
    lines = [line for line in log.splitlines() if CERTIFICATE_LOG_PREFIX in line]
    assert len(lines) == 1, log[-3000:]
    assert " INFO " in lines[0] and "pid=" in lines[0] and "[check.py:" in lines[0], lines[0][:160]
    logged = json.loads(lines[0].split(CERTIFICATE_LOG_PREFIX, 1)[1])
    assert logged == json.loads(cert_path.read_text())
    assert logged["kind"] == "vosti-determinism-certificate" and logged["model"]["dtype"] == "float32"
