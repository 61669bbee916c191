"""Catalog of the KV write kernel (vosti_plugin/attention/kv_write.py); its contract is written above
the kernel."""
from __future__ import annotations


def entries() -> list[dict]:
    import triton

    from vosti_plugin.attention import config as cfgmod
    from vosti_plugin.attention import kv_write

    configs = []
    heads = (1, 2, 4, 8, 16, 32)  # KV heads of the served geometries and their TP shards
    for key, _cfg in cfgmod.CATALOG:
        for h in heads:
            c = {"HEAD_DIM": key.head_dim, "HEAD_DIM_PAD": triton.next_power_of_2(key.head_dim),
                 "PAGE_SIZE": key.page_size, "BLOCK_H": triton.next_power_of_2(h)}
            if (c, {"head_dim": key.head_dim, "page_size": key.page_size}) not in configs:
                configs.append((c, {"head_dim": key.head_dim, "page_size": key.page_size}))
    return [{"family": "kv_write", "kernel": kv_write._write_kv_kernel, "configs": configs}]
