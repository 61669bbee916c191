"""How many times each installed op ran through vosti's kernels in this process (tests read it).

Counted inside the op bodies, which torch.compile never traces, so compiled runs are counted too
(CUDA-graph replays are not: nothing on the host runs for them).
"""
from __future__ import annotations

from collections import Counter

calls: Counter[str] = Counter()
