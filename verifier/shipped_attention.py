"""Catalog of the shipped paged-attention kernels (vosti_plugin/attention); their contracts are written
above the kernels in paged_attention.py."""
from __future__ import annotations


def entries() -> list[dict]:
    import dataclasses

    import torch

    from vosti_plugin.attention import config as cfgmod
    from vosti_plugin.attention import paged_attention as pa

    configs: list[tuple[dict, dict]] = []
    for key, cfg in cfgmod.CATALOG:
        base = {"HEAD_DIM": key.head_dim, "HEAD_DIM_PAD": cfgmod.next_power_of_two(key.head_dim),
                "PAGE_SIZE": key.page_size, "QUERIES_PER_KV": cfg.queries_per_kv, "GROUP": cfg.group,
                "BLOCK_Q": cfg.block_q, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "SEGMENT": cfg.segment,
                "SEQ_SCAN_CHUNK": pa._SEQ_SCAN_CHUNK,
                "DOT_PRECISION": "ieee" if key.dtype == torch.float32 else "tf32"}
        fam = dataclasses.asdict(cfg)
        for soft_cap in (False, True):
            for window in (False, True):
                configs.append(({**base, "USE_SOFT_CAP": soft_cap, "USE_WINDOW": window, "FUSED": True}, fam))
    split = [({**c, "FUSED": False}, fam) for c, fam in configs]
    comb = []
    for c, fam in configs:
        cc = ({"HEAD_DIM": c["HEAD_DIM"], "HEAD_DIM_PAD": c["HEAD_DIM_PAD"], "SEGMENT": c["SEGMENT"], "SEQ_SCAN_CHUNK": c["SEQ_SCAN_CHUNK"],
               "USE_WINDOW": c["USE_WINDOW"]}, fam)
        if cc not in comb:
            comb.append(cc)
    return [{"family": "paged_attention", "kernel": pa._paged_attention_segments_kernel, "configs": configs + split},
            {"family": "paged_attention", "kernel": pa._combine_segments_kernel, "configs": comb}]
