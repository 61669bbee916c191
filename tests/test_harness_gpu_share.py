"""Harness workers sharing a GPU start only while their memory estimates fit (CPU: threads stand in for workers;
the H100 case is the one that ran out of memory with four workers at once)."""
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vosti_plugin.integration.harness import models
from vosti_plugin.integration.harness.gpu_share import GIB, USABLE_SHARE, GpuShare, worker_bytes

H100, H200 = 80 * GIB, 141 * GIB


def _run(share: GpuShare, needs: list[int], hold_s: float = 0.002) -> list[list[tuple[int, int]]]:
    """Run a thread per job through share.take; return, per job, the (gpu, need) of every job running beside it."""
    running: list[tuple[int, int]] = []
    seen: list[list[tuple[int, int]]] = [[] for _ in needs]
    lock = threading.Lock()

    def job(i: int) -> None:
        with share.take(needs[i]) as gpu:
            with lock:
                running.append((gpu, needs[i]))
                seen[i] = list(running)
            time.sleep(hold_s)
            with lock:
                running.remove((gpu, needs[i]))

    threads = [threading.Thread(target=job, args=(i,)) for i in range(len(needs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a job never started"
    return seen


@settings(max_examples=40, deadline=None)
@given(gpus=st.integers(1, 3), slots=st.integers(1, 4), capacity_gib=st.integers(20, 160),
       needs_gib=st.lists(st.integers(1, 200), min_size=1, max_size=10))
def test_jobs_on_a_gpu_never_exceed_its_slots_or_memory(gpus, slots, capacity_gib, needs_gib):
    share = GpuShare(gpus, slots, [capacity_gib * GIB] * gpus)
    budget = int(capacity_gib * GIB * USABLE_SHARE)
    for beside in _run(share, [n * GIB for n in needs_gib]):
        for gpu in range(gpus):
            on_gpu = [need for g, need in beside if g == gpu]
            assert len(on_gpu) <= slots
            assert len(on_gpu) == 1 or sum(on_gpu) <= budget, (on_gpu, budget)


def test_llama_workers_share_an_h100_two_at_a_time_and_an_h200_four():
    llama = worker_bytes(models.get("llama31-8b").config, 5)
    assert 24 * GIB < llama < 32 * GIB   # the H100 showed 25.5-27.0 GiB per worker
    on_h100 = _run(GpuShare(1, 4, [H100]), [llama] * 4, hold_s=0.3)
    on_h200 = _run(GpuShare(1, 4, [H200]), [llama] * 4, hold_s=0.3)
    assert max(len(s) for s in on_h100) == 2
    assert max(len(s) for s in on_h200) == 4


def test_without_memory_sizes_only_slots_bound_the_jobs():
    seen = _run(GpuShare(2, 2), [500 * GIB] * 6)
    assert all(len([1 for g, _ in s if g == gpu]) <= 2 for s in seen for gpu in (0, 1))


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="at least one GPU"):
        GpuShare(0, 1)
    with pytest.raises(ValueError, match="2 GPU memory sizes for 1 GPUs"):
        GpuShare(1, 2, [H100, H100])
