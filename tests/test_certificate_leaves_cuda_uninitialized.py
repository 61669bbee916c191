"""The certificate's GPU facts must not initialize CUDA: it is built in the process that starts vLLM's engine,
and vLLM then has to spawn its engine core instead of forking it (H200: about 20 s more startup). On this CPU
machine a GPU host is stood in for by torch reporting CUDA available, CUDA initialization raising, and an
`nvidia-smi` on PATH."""
import os
import stat

import pytest
import torch

from vosti_plugin.launch import certificate


@pytest.fixture
def gpu_host(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "NVIDIA H200, 575.57.08"\n'
                   'echo "NVIDIA H100 80GB HBM3, 575.57.08"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)

    def _no_init(*_a, **_k):
        raise AssertionError("CUDA initialized in the launching process")

    monkeypatch.setattr(torch.cuda, "_lazy_init", _no_init)
    return tmp_path


def test_gpu_name_and_driver_come_from_nvidia_smi_without_cuda(gpu_host, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    out = certificate._versions()
    assert (out["gpu"], out["driver"]) == ("NVIDIA H200", "575.57.08")
    assert "-i" not in (gpu_host / "args").read_text().split()


def test_the_first_visible_device_is_queried(gpu_host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    certificate._versions()
    assert (gpu_host / "args").read_text().split()[-2:] == ["-i", "3"]


def test_a_host_without_nvidia_smi_gives_no_name_rather_than_initializing_cuda(gpu_host, monkeypatch):
    (gpu_host / "nvidia-smi").unlink()
    monkeypatch.setenv("PATH", str(gpu_host))
    out = certificate._versions()
    assert out["gpu"] is None and out["driver"] is None


_ACTIVATE = """
import os, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.platforms import current_platform
from vosti_plugin.integration.tiny_model import ensure_tiny_model
from vosti_plugin import selection
from vosti_plugin.launch.check import CERTIFICATE_ENV

config = EngineArgs(model=str(ensure_tiny_model()), attention_backend="vosti", dtype="float32",
                    max_model_len=256).create_engine_config()
assert current_platform.device_type == "cpu"
import torch

def no_init(*_a, **_k):
    raise AssertionError("CUDA initialized in the launching process")

torch.cuda.is_available = lambda: True
torch.cuda.is_initialized = lambda: False
torch.cuda._lazy_init = no_init
os.environ[CERTIFICATE_ENV] = sys.argv[1]     # another certificate path: a fresh check, not the cached verdict
selection.deactivate()
selection.activate(config)
print("ACTIVATED")
"""


@pytest.mark.vllm
def test_vosti_activation_in_the_launching_process_leaves_cuda_uninitialized(tmp_path):
    """The whole of what selecting vosti runs where vLLM's engine config is built (launch check, certificate,
    runtime install), on a real vLLM config, with CUDA reported available and its initialization raising."""
    import subprocess
    import sys
    from pathlib import Path

    cert = tmp_path / "cert.json"
    proc = subprocess.run([sys.executable, "-c", _ACTIVATE, str(cert)], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "ACTIVATED" in proc.stdout and cert.exists()
