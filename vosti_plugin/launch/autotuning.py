"""The `autotune` launch fact, read from the kernels vosti launches: a Triton autotuner that can pick
among configs at run time (more than one config, or a pruning / performance-model hook) makes a row's
arithmetic depend on what was timed, so the `no-autotuning` obligation refuses it. An autotuner pinned
to a single config without hooks is one fixed launch (the verifier proves that config)."""
from __future__ import annotations

import importlib

KERNEL_MODULES = (
    "vosti_plugin.attention.paged_attention",
    "vosti_plugin.attention.kv_write",
    "vosti_plugin.ops.matmul",
    "vosti_plugin.ops.rmsnorm",
    "vosti_plugin.ops.softmax",
    "vosti_plugin.ops.activation",
)


def _tunes_at_run_time(kernel) -> bool:
    hooks = getattr(kernel, "early_config_prune", None) or getattr(kernel, "perf_model", None)
    return len(kernel.configs) > 1 or bool(hooks)


def _autotuners(obj):
    """The autotuners in a kernel object's wrapper chain (@triton.heuristics over @triton.autotune, ...)."""
    from triton.runtime.autotuner import Autotuner

    seen = 0
    while obj is not None and seen < 8:
        if isinstance(obj, Autotuner):
            yield obj
        obj = getattr(obj, "fn", None)
        seen += 1


def autotuned_kernels(module_names=None) -> list[str]:
    """'module.kernel' for every kernel in `module_names` (default KERNEL_MODULES) that autotunes at run time."""
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()   # before any kernel module is imported
    found = []
    for name in KERNEL_MODULES if module_names is None else module_names:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if any(_tunes_at_run_time(a) for a in _autotuners(obj)):
                found.append(f"{name}.{attr}")
    return sorted(found)
