"""The determinism certificate written when a launch is accepted."""
from __future__ import annotations

import datetime
import hashlib
import platform

from vosti_plugin.launch.facts import LaunchFacts

TRUSTED_BASE = (
    "the Triton compiler and its code generation for the listed versions",
    "the device's floating-point arithmetic (equal inputs give equal outputs)",
    "the translation of kernel source into the verifier's IR",
    "the vLLM engine/kernel interface (metadata passed to the kernels is what the engine scheduled)",
    "ops outside the vosti kernels are per-element (activations, rotary embedding, embedding lookup)",
    "a tl.dot element depends on its row, its column and its reduction order only, not on the tile shape or the "
    "warps (prefill GEMM tiles against decode tiles; checked on the GPU by integration/gpu/tall_gemm_check.py)",
)
NOT_PROMISED = (
    "agreement across dtypes, kernel configs, compiler versions or hardware",
    "correctness of the model itself (vosti checks it against a reference forward only in tests)",
)


def _versions() -> dict:
    import torch
    import triton

    out = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}
    try:
        from vosti_plugin.vllm.compat import vllm_version

        out["vllm"] = vllm_version()
    except Exception:
        out["vllm"] = None
    from vosti_plugin import __version__

    out["vosti_plugin"] = __version__
    if torch.cuda.is_available():
        out["cuda"] = torch.version.cuda
        out["gpu"], out["driver"] = _gpu_name_and_driver(torch)
    else:
        out["gpu"] = None
        out["cpu"] = platform.processor() or platform.machine()
    return out


def _gpu_name_and_driver(torch) -> tuple[str | None, str | None]:
    """The first visible GPU's name and the driver version, without initializing CUDA in this process: the
    certificate is built in the process that spawns vLLM's engine, and vLLM must then spawn instead of fork
    its engine core (a fresh interpreter importing torch and vLLM again, about 20 s on the H200 host)."""
    import os
    import subprocess

    name = torch.cuda.get_device_name(0) if torch.cuda.is_initialized() else None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    try:
        lines = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", *(["-i", visible] if visible
                                                                                         else [])],
            capture_output=True, text=True, timeout=10).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return name, None
    first = [f.strip() for f in lines[0].split(",")] if lines else []
    if len(first) != 2:
        return name, None
    return name or first[0], first[1]


def weights_fingerprint(model_path: str) -> str | None:
    """sha256 over the names and sizes of the weight files plus the first MiB of each (cheap, stable)."""
    from pathlib import Path

    root = Path(model_path)
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    files = sorted(p for p in root.iterdir() if p.suffix in (".safetensors", ".bin", ".pt", ".json"))
    for p in files:
        h.update(p.name.encode())
        h.update(str(p.stat().st_size).encode())
        with open(p, "rb") as fh:
            h.update(fh.read(1 << 20))
    return h.hexdigest() if files else None


def build_certificate(facts: LaunchFacts, vllm_config, seconds: float) -> dict:
    from vosti_plugin.launch.verified import kernel_configs_for

    load_format = str(getattr(vllm_config.load_config, "load_format", "")) if vllm_config is not None else ""
    return {
        "kind": "vosti-determinism-certificate",
        "issued": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "model": facts.to_dict(),
        "weights_fingerprint": None if "dummy" in load_format else weights_fingerprint(facts.model),
        "load_format": load_format,
        "kernel_configs": kernel_configs_for(facts),
        "versions": _versions(),
        "trusted_base": list(TRUSTED_BASE),
        "not_promised": list(NOT_PROMISED),
        "check_seconds": round(seconds, 4),
    }
