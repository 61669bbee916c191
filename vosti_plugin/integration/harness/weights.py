"""Re-draw dummy weights so that logits depend on the context (vLLM's dummy U(-1e-3, 1e-3) weights
give near-zero logits that barely see the context, which makes every engine look deterministic).

Matrices N(0, 1/fan_in) (fan_in = last dim), token embeddings N(0, 1) (Gemma: N(0, 1/hidden), it
multiplies them by sqrt(hidden)), RMSNorm gains 1, Gemma's (1 + w) norm weights 0, biases 0.
A backend that repacks weights at load (vLLM's CPU oneDNN path) hides them from this; the context
check (`context_sensitivity`) then fails and says so.
Every tensor is drawn in place from a generator seeded by its name, so all modes get equal weights
and captured CUDA graphs keep pointing at the same storage.
"""
from __future__ import annotations

import zlib

SEED = 20261129


def _is_norm(module) -> bool:
    return "RMSNorm" in type(module).__name__ or "LayerNorm" in type(module).__name__


def _is_gemma_norm(module) -> bool:
    return type(module).__name__.startswith("Gemma") and "RMSNorm" in type(module).__name__


def redraw(model) -> dict:
    """Run inside the worker through `LLM.apply_model(redraw)`; returns counts of what it drew."""
    import torch

    done: set[int] = set()
    counts = {"norm_ones": 0, "norm_zeros": 0, "matrices": 0, "embeddings": 0, "biases_zero": 0, "skipped": []}
    gemma = "gemma" in type(model).__name__.lower()
    with torch.no_grad():
        for module in model.modules():
            if not _is_norm(module):
                continue
            for p in module.parameters(recurse=False):
                if _is_gemma_norm(module):
                    p.zero_()
                    counts["norm_zeros"] += 1
                else:
                    p.fill_(1.0)
                    counts["norm_ones"] += 1
                done.add(id(p))
        for name, p in model.named_parameters():
            if id(p) in done:
                continue
            done.add(id(p))
            if p.dim() < 2:
                if name.endswith("bias"):
                    p.zero_()
                    counts["biases_zero"] += 1
                else:     # e.g. a backend's packed weight: left alone; the context check will tell
                    counts["skipped"].append(name)
                continue
            g = torch.Generator(device=p.device).manual_seed(SEED ^ zlib.crc32(name.encode()))
            fresh = torch.empty(p.shape, dtype=torch.float32, device=p.device)
            if "embed_tokens" in name and not gemma:
                fresh.normal_(0.0, 1.0, generator=g)
                counts["embeddings"] += 1
            else:
                fresh.normal_(0.0, p.shape[-1] ** -0.5, generator=g)
                counts["matrices"] += 1
            p.copy_(fresh.to(p.dtype))
    return counts


def context_sensitivity(llm, vocab: int, k: int) -> dict:
    """Two prompts that end in the same token but differ before it must get different logits."""
    import random

    from vllm import SamplingParams

    from vosti_plugin.integration.harness.views import sampled_view
    from vosti_plugin.integration.evidence import bitwise_equal, max_abs_diff

    rng = random.Random(7)
    last = rng.randrange(4, vocab)
    a = [rng.randrange(4, vocab) for _ in range(23)] + [last]
    b = [rng.randrange(4, vocab) for _ in range(23)] + [last]
    params = SamplingParams(temperature=0.0, max_tokens=1, logprobs=k, ignore_eos=True, detokenize=False,
                            skip_reading_prefix_cache=True)
    va, vb = (sampled_view(o, k) for o in llm.generate(
        [{"prompt_token_ids": a}, {"prompt_token_ids": b}], params, use_tqdm=False))
    top_a = {t for t, _ in va[0].top}
    top_b = {t for t, _ in vb[0].top}
    diff = max_abs_diff(va, vb)
    spread = max(v for _, v in va[0].top) - min(v for _, v in va[0].top)
    return {
        "bitwise_different": not bitwise_equal(va, vb),
        "top_k_sets_differ": top_a != top_b,
        "max_abs_diff_on_shared_ids": diff,
        "top_k_logit_spread": spread,
        # dummy U(-1e-3, 1e-3) weights give logits of about 1e-5: a spread that small means blind
        "passed": (top_a != top_b or diff > 1e-2) and spread > 1e-2,
    }
