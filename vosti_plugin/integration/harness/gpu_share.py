"""Harness workers sharing GPUs: a job starts on a GPU only while its memory estimate fits beside the jobs
already there (and a worker slot is free). Four Llama-3.1-8B workers (about 26 GiB each: weights, a 5 GiB KV
cache, CUDA graphs and workspaces) do not fit an 80 GiB H100; on a 141 GiB H200 they do."""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading

GIB = 1 << 30
# Beside its weights and its fixed KV cache, a worker holds activations, CUDA graphs, vosti's split workspace
# (up to 2 GiB) and the CUDA context; the H100 showed Llama-3.1-8B workers at 25.5-27.0 GiB with 15 GiB of weights.
WORKER_OVERHEAD_BYTES = 8 * GIB
DEFAULT_KV_GIB = "5"   # each shared worker's fixed KV cache ($VOSTI_HARNESS_KV_GIB): a 33K-token sequence of any GPU model
USABLE_SHARE = 0.9   # of each GPU's memory


def worker_bytes(model_config: dict | None, kv_gib: float) -> int:
    """A worker's memory estimate: bf16 weights of the geometry (none for the bundled tiny model), its KV cache,
    WORKER_OVERHEAD_BYTES."""
    weights = 0
    if model_config is not None:
        from vosti_plugin.integration.bench.throughput import weight_bytes

        weights = weight_bytes(model_config)
    return weights + int(kv_gib * GIB) + WORKER_OVERHEAD_BYTES


def gpu_memory_bytes(count: int) -> list[int] | None:
    """Each visible GPU's memory from nvidia-smi (the parent process creates no CUDA context); None if unknown."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        mib = [int(line.strip()) for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return [m << 20 for m in mib[:count]] if len(mib) >= count else None


class GpuShare:
    """Places jobs on GPUs by worker slots and memory. A job larger than a whole GPU's budget runs alone on it."""

    def __init__(self, gpus: int, slots_per_gpu: int, capacity_bytes: list[int] | None = None):
        if gpus < 1 or slots_per_gpu < 1:
            raise ValueError(f"need at least one GPU and one worker per GPU, got {gpus} and {slots_per_gpu}")
        if capacity_bytes is not None and len(capacity_bytes) != gpus:
            raise ValueError(f"{len(capacity_bytes)} GPU memory sizes for {gpus} GPUs")
        self._budget = [int(c * USABLE_SHARE) for c in capacity_bytes] if capacity_bytes else None
        self._slots = slots_per_gpu
        self._running: list[list[int]] = [[] for _ in range(gpus)]
        self._cond = threading.Condition()

    def _fits(self, gpu: int, need: int) -> bool:
        running = self._running[gpu]
        if len(running) >= self._slots:
            return False
        return self._budget is None or not running or sum(running) + need <= self._budget[gpu]

    @contextlib.contextmanager
    def take(self, need_bytes: int):
        """Wait for a GPU this job fits on; yield its index; give its share back on exit."""
        with self._cond:
            while True:
                gpu = next((g for g in range(len(self._running)) if self._fits(g, need_bytes)), None)
                if gpu is not None:
                    break
                self._cond.wait()
            self._running[gpu].append(need_bytes)
        try:
            yield gpu
        finally:
            with self._cond:
                self._running[gpu].remove(need_bytes)
                self._cond.notify_all()
