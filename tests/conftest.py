"""Test-wide settings: CPU runs through the Triton interpreter in fp32; vLLM starts in-process."""
import os
import platform
import sys


def _force_lane_dependent_blas() -> None:
    """Run the suite on OpenBLAS's Haswell kernel, which gives a GEMM row other bits at other lanes of
    a tile (the kernel an AMD EPYC host picks): every bitwise test then sees the worst host we know of,
    whatever CPU runs it. Needs AVX2 + FMA, and numpy not imported yet; VOSTI_TEST_BLAS=host opts out."""
    if os.environ.get("VOSTI_TEST_BLAS", "haswell") != "haswell" or "numpy" in sys.modules:
        return
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return
    if " avx2" in flags and " fma" in flags:
        os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")


_force_lane_dependent_blas()

import pytest  # noqa: E402

try:
    import torch

    _HAS_GPU = torch.cuda.is_available()
except Exception:  # pragma: no cover
    _HAS_GPU = False

if not _HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VOSTI_AUDIT", "1")
# Engines built through vosti_plugin.integration.engine_presets skip torch.compile (3 min -> 30 s per CPU engine start);
# the compiled path is what `vosti demo` runs in .ci/run.
os.environ.setdefault("VOSTI_ENFORCE_EAGER", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], derandomize=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_runtest_logreport(report):
    """VOSTI_TEST_TIMES=PATH appends `seconds phase nodeid` per test phase as it ends (to find slow tests
    while a long run is still going)."""
    path = os.environ.get("VOSTI_TEST_TIMES")
    if path and report.duration > 0.5:
        with open(path, "a") as fh:
            fh.write(f"{report.duration:.1f} {report.when} {report.nodeid}\n")


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject addopts): one worker per core, at most 4 (each worker starts its own vLLM
    engines, about 3 GiB each); whole files per worker (`--dist loadfile`) so module fixtures are shared."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 4))


# The files that take longest on 2 cores (`python3 -m pytest -q --durations=0`, summed per file), longest first.
# xdist hands whole files to the workers in collection order (`--no-loadscope-reorder` in pyproject: its default
# order, most tests first, started the longest file last and left one core idle for its last ten minutes).
_LONGEST_FILES = ("test_sampling_vllm.py", "test_harness_cpu.py", "test_attention_batch_invariance.py",
                  "test_attention_any_geometry.py", "test_norm_launch_pairs_vllm.py", "test_host_numerics.py",
                  "test_attention_sliding_window.py", "test_attention_fused_prefill.py")


def _longest_first(item) -> int:
    name = item.path.name
    return _LONGEST_FILES.index(name) if name in _LONGEST_FILES else len(_LONGEST_FILES)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_longest_first)   # stable: the rest keep their order
    if _HAS_GPU:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200 through the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    from vosti_plugin.integration.tiny_model import ensure_tiny_model

    return str(ensure_tiny_model())


@pytest.fixture(autouse=True, scope="module")
def _vosti_runtime_reset_after_module():
    """A module that started vLLM with vosti leaves the process-wide runtime (ops overrides, the active
    flag, the launch guard its audit-mode launch check armed) behind; reset it so the next module starts
    from stock behaviour."""
    yield
    from vosti_plugin import selection
    from vosti_plugin.launch import guard

    selection.deactivate()
    guard.disarm()
    # The module's engines are gone once its fixtures are torn down: collect them now, and drop vLLM's
    # process-wide parallel groups, so a late finalizer cannot tear down the groups of the next module's engine.
    import gc
    import sys

    gc.collect()
    if "vllm.distributed.parallel_state" in sys.modules:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()


@pytest.fixture
def launch_guard_off():
    """For a test that launches vosti kernels with configs outside the proved catalog on purpose (small
    tiles, odd geometries): VOSTI_AUDIT=1 arms the launch guard in every process that started a vosti
    engine, and the guard would refuse those launches. Restores the guard's state afterwards."""
    from vosti_plugin.launch import guard

    with guard.suspended():
        yield
