"""Run our Triton kernels through Triton's interpreter when there is no GPU.

`triton.jit` decides between compiling and interpreting when a kernel is defined, so this must run
before any kernel module is imported. On CPU the interpreter is the only way to execute them; it is
exact in fp32 (bf16 through the interpreter is broken, so CPU deployments use fp32).
"""
from __future__ import annotations

import os


def ensure_interpreter_without_gpu() -> None:
    if os.environ.get("TRITON_INTERPRET"):
        return
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        os.environ["TRITON_INTERPRET"] = "1"


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
