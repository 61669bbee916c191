"""Opt-in forward-path counters: how many times each vosti op and attention step ran in this process.

Tests turn them on to prove vosti's code ran rather than stock vLLM's. Off by default: `counts` is then
None and each call site pays one global load and a None test, nothing else. On inside `counting()`, or
for the whole process with VOSTI_FORWARD_COUNTERS=1 (an engine core in another process counts only then).

Counted inside the op bodies, which torch.compile never traces, so compiled runs are counted too
(CUDA-graph replays are not: nothing on the host runs for them). Names: the aten overrides (`mm`,
`addmm`, `softmax`, `log_softmax`, `mean`), the custom ops (`linear`, `rms_norm`, `fused_add_rms_norm`,
`norm_add_rms_norm`, `qk_rms_norm`, `act_and_mul`), and the attention backend (`attention`, `kv_write`, `attention_in_launches`).
"""
from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator

ENV = "VOSTI_FORWARD_COUNTERS"

counts: Counter[str] | None = Counter() if os.environ.get(ENV, "") == "1" else None


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count for the duration of the block, into a fresh Counter that the block gets; on exit the counts
    are added to an enclosing block's (or the process-wide) Counter, and counting is as it was."""
    global counts
    outer = counts
    inner = counts = Counter()
    try:
        yield inner
    finally:
        counts = outer
        if outer is not None:
            outer.update(inner)
