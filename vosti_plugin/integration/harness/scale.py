"""How big each variation class is: `cpu` (tiny model through the Triton interpreter, minutes) and
`gpu` (the paper's sizes: 288 batch + 90 chunk + 384 prefill-vs-decode + 14 prefix comparisons)."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Scale:
    name: str
    # batch composition: each target alone vs inside a batch of each size, in each order
    batch_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    batch_orders: tuple[str, ...]
    batch_decode_tokens: int
    batch_neighbour_lengths: tuple[int, ...]   # extra neighbours besides the other targets
    # chunked prefill: unchunked vs each token budget, with a neighbour that shifts the chunk grid
    chunk_lengths: tuple[int, ...]
    chunk_budgets: tuple[int, ...]
    chunk_decode_tokens: int
    # prefill vs decode: logits of the last `pd_positions` positions, by prefill and by decode
    pd_lengths: tuple[int, ...]
    pd_positions: int
    pd_prefill_budget: int            # prompt-logprob prefills run in chunks of at most this
    # prefix reuse: cases per kind (full, partial, divergent, generated)
    prefix_lengths: tuple[int, ...]
    prefix_decode_tokens: int
    prefix_generated_tokens: int      # decode steps of the primer in generated-prefix cases
    # engine
    max_num_batched_tokens: int
    max_model_len: int
    top_k: int = 20

    @property
    def planned(self) -> dict[str, int]:
        return {
            "batch": len(self.batch_lengths) * len(self.batch_sizes) * len(self.batch_orders),
            "chunk": len(self.chunk_lengths) * len(self.chunk_budgets),
            "prefill_decode": len(self.pd_lengths) * self.pd_positions,
            "prefix": len(prefix_plan(self)),
        }


# Lengths straddle page sizes (16, 32) and powers of two, where kernels switch tiles or variants.
_GPU_BATCH = (15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513,
              1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 100, 300, 700, 1500, 3000)
_GPU_CHUNK = (65, 100, 127, 129, 255, 257, 300, 511, 513, 700, 1000, 1023, 1025, 1500, 2047, 2049,
              3000, 4097)

GPU = Scale(
    name="gpu",
    batch_lengths=_GPU_BATCH, batch_sizes=(2, 4, 8), batch_orders=("first", "middle", "last"),
    batch_decode_tokens=8, batch_neighbour_lengths=(),
    chunk_lengths=_GPU_CHUNK, chunk_budgets=(64, 128, 256, 512, 1024), chunk_decode_tokens=4,
    pd_lengths=(257, 8192, 32768), pd_positions=128, pd_prefill_budget=4096,   # 4096 x 262K-vocab logits: 4 GiB
    # page sizes up to 64 (vosti's GPU default): every shared prefix spans at least one full page
    prefix_lengths=(160, 257, 1000, 2049), prefix_decode_tokens=8, prefix_generated_tokens=72,
    max_num_batched_tokens=8192, max_model_len=32768 + 256,
)

# A GPU run of a few minutes per mode (new geometries, regression checks): the stock-vLLM baseline's sizes
# (72 batch, 18 chunk, 96 prefill-vs-decode, 14 prefix comparisons).
GPU_QUICK = Scale(
    name="gpu-quick",
    batch_lengths=(15, 17, 63, 65, 129, 257, 513, 1025, 2049, 4097, 300, 1500), batch_sizes=(2, 8),
    batch_orders=("first", "middle", "last"), batch_decode_tokens=8, batch_neighbour_lengths=(),
    chunk_lengths=(100, 257, 513, 1025, 2049, 3000), chunk_budgets=(64, 256, 1024), chunk_decode_tokens=4,
    pd_lengths=(257, 2048, 8192), pd_positions=32, pd_prefill_budget=4096,
    prefix_lengths=(160, 257, 1000, 2049), prefix_decode_tokens=8, prefix_generated_tokens=72,
    max_num_batched_tokens=8192, max_model_len=8192 + 256,
)

# CPU: vosti's kernels run through Triton's interpreter (about 0.1 s per token and 0.4 s per step
# for the tiny model on 2 cores), so every class is cut to a few cases that still cross a page.
# Stock vLLM on CPU already differs at these sizes (decode past 64 tokens of context), so the CPU run
# shows the harness catching a mismatch, not only vosti passing.
CPU = Scale(
    name="cpu",
    batch_lengths=(15, 65), batch_sizes=(2, 4), batch_orders=("first", "last"),
    batch_decode_tokens=2, batch_neighbour_lengths=(5, 9),
    chunk_lengths=(70,), chunk_budgets=(32, 64), chunk_decode_tokens=2,
    pd_lengths=(100,), pd_positions=6, pd_prefill_budget=512,
    prefix_lengths=(50,), prefix_decode_tokens=2, prefix_generated_tokens=16,
    max_num_batched_tokens=512, max_model_len=1024,
)

# gpu-quick's cases under a 32K max_model_len: a CUDA-graph decode step's attention grid spans 65 segments, more than a
# split launch's programs per block and head (paged_attention.SPLIT_SEGMENT_STRIDE), so programs take several each.
GPU_QUICK_32K = replace(GPU_QUICK, name="gpu-quick-32k", max_model_len=32768 + 256)

SCALES = {"cpu": CPU, "gpu": GPU, "gpu-quick": GPU_QUICK, "gpu-quick-32k": GPU_QUICK_32K}


def get(name: str) -> Scale:
    try:
        return SCALES[name]
    except KeyError:
        raise ValueError(f"unknown scale {name!r}; known: {', '.join(SCALES)}") from None


def prefix_plan(scale: Scale) -> list[tuple[str, int, int]]:
    """(kind, prompt length, shared length) for each prefix-reuse case.

    GPU: 14 cases = 3 full + 4 partial + 4 divergent + 3 generated. CPU: one or two per kind."""
    lengths = scale.prefix_lengths
    plan: list[tuple[str, int, int]] = []
    for n in lengths[:3]:
        plan.append(("full", n, n))
    for n in lengths[:4]:
        plan.append(("partial", n, (n * 2) // 3))        # the cache holds the first 2/3 of the prompt
    for n in lengths[:4]:
        plan.append(("divergent", n, n // 2 + 10))        # a cached prompt shares n//2+10 tokens, then differs
    for n in lengths[:3]:
        plan.append(("generated", n, 0))                  # reuse pages holding tokens the engine generated
    return plan
