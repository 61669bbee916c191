"""Which kernel configs a geometry launches, and whether the verifier proved each of them."""
from __future__ import annotations

import dataclasses

import torch

from vosti_plugin.launch.facts import LaunchFacts


def linear_shapes(f: LaunchFacts) -> dict[str, tuple[int, int]]:
    """(N, K) of every linear layer of a Llama/Qwen/Gemma-style decoder with this geometry."""
    q = f.num_q_heads * f.head_size
    kv = f.num_kv_heads * f.head_size
    return {
        "qkv_proj": (q + 2 * kv, f.hidden_size),
        "o_proj": (f.hidden_size, q),
        "gate_up_proj": (2 * f.intermediate_size, f.hidden_size),
        "down_proj": (f.hidden_size, f.intermediate_size),
        "lm_head": (f.vocab_size, f.hidden_size),
    }


def kernel_configs_for(f: LaunchFacts) -> dict:
    from vosti_plugin.attention.config import select_config as attention_config
    from vosti_plugin.ops.matmul import TALL_MIN_ROWS, tall_config, tall_path_on
    from vosti_plugin.ops.matmul import select_config as matmul_config

    dtype = getattr(torch, f.dtype)
    configs = {"paged_attention": dataclasses.asdict(attention_config(
        f.head_size, f.num_q_heads, f.num_kv_heads, f.page_size, dtype))}
    for name, (n, k) in linear_shapes(f).items():
        if n and k:
            config = matmul_config(n, k, dtype)
            configs[f"matmul/{name}"] = {"N": n, "K": k, **dataclasses.asdict(config)}
            if tall_path_on(TALL_MIN_ROWS):   # VOSTI_TALL_GEMM=1: prefill-sized GEMMs launch these too
                configs[f"matmul/{name}/tall"] = {"N": n, "K": k, **dataclasses.asdict(tall_config(config, dtype))}
    return configs


def unverified_configs(f: LaunchFacts) -> list[str]:
    """Kernel configs this launch uses that the verifier did not prove (empty when all are proved)."""
    from verifier.api import cached_results, proved_configs

    if cached_results() is None:
        import logging

        logging.getLogger("vosti").warning(
            "vosti: no proofs cached for these kernel sources; verifying the kernel catalog once "
            "(about 20 s on 2 cores; `vosti verify` does it ahead of time)")
    proved = proved_configs(run=True)
    missing = []
    for kernel, cfg in kernel_configs_for(f).items():
        family = kernel.split("/")[0]
        key = {k: v for k, v in cfg.items() if k not in ("N", "K")}
        if not any(family == fam and key == dict(c) for fam, c in proved):
            missing.append(f"{kernel} {key}")
    return missing
