"""Catalogs of the shipped dense-op kernels (vosti_plugin/ops); their contracts are written above the
kernels."""
from __future__ import annotations


def entries() -> list[dict]:
    """Every shipped dense kernel with the constexpr configs its catalog can launch."""
    import dataclasses

    import torch

    from vosti_plugin.ops import activation, matmul, rmsnorm, softmax

    mm_cfgs = [(cfg, getattr(torch, dt)) for (_n, _k, dt), cfg in matmul.CATALOG.items()]
    mm_cfgs += [(matmul.rule_config(4096, 4096, torch.float32), torch.float32)]
    mm_cfgs += [pair for pair in matmul.rule_configs() if pair not in mm_cfgs]
    out: list[dict] = []
    plain, split, tall = [], [], []
    for cfg, dtype in mm_cfgs + [(matmul.tall_config(cfg, dtype), dtype) for cfg, dtype in mm_cfgs]:
        fam = dataclasses.asdict(cfg)
        base = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
                "DOT_PRECISION": "ieee" if dtype == torch.float32 else "tf32"}
        if cfg.split_k == 1:
            plain += [({**base, "HAS_BIAS": hb}, fam) for hb in (False, True)]
        elif (cfg, dtype) in mm_cfgs:
            split.append(({**base, "SPLIT_K": cfg.split_k}, fam))
        else:  # the tall path of a split config: one program per tile sums its splits
            tall += [({**base, "HAS_BIAS": hb}, fam) for hb in (False, True)]
    out.append({"family": "matmul", "kernel": matmul.mm_kernel, "configs": plain})
    out.append({"family": "matmul", "kernel": matmul.mm_splitk_partial_kernel, "configs": split})
    out.append({"family": "matmul", "kernel": matmul.mm_tall_kernel, "configs": tall})
    combine = [({"HAS_BIAS": hb, "SPLIT_K": c["SPLIT_K"], "BLOCK_M": matmul._COMBINE_BLOCK_M,
                 "BLOCK_N": matmul._COMBINE_BLOCK_N}, fam) for c, fam in split for hb in (False, True)]
    out.append({"family": "matmul", "kernel": matmul.splitk_combine_kernel, "configs": combine})
    hidden = (4096, 2560, 128, 256)
    rms = [({"BLOCK": rmsnorm.select_config(h).block, "HAS_RESIDUAL": r, "WEIGHT_MODE": w}, {"hidden": h})
           for h in hidden for r in (False, True) for w in (0, 1, 2)]
    out.append({"family": "rms_norm", "kernel": rmsnorm.rms_norm_kernel, "configs": rms})
    widths = (128256, 151936, 262208, 4096, 2560)
    out.append({"family": "softmax", "kernel": softmax.softmax_kernel,
                "configs": [({"BLOCK": softmax.select_config(v).block, "LOG": lg}, {"n_cols": v})
                            for v in widths for lg in (False, True)]})
    out.append({"family": "softmax", "kernel": softmax.mean_kernel,
                "configs": [({"BLOCK": softmax.select_config(v).block}, {"n_cols": v}) for v in widths]})
    out.append({"family": "activation", "kernel": activation.act_and_mul_kernel,
                "configs": [({"ACT": act, "BLOCK": activation.BLOCK}, {"act": name})
                            for act, name in ((activation.SILU, "silu"), (activation.GELU_TANH, "gelu_tanh"))]})
    for e in out:
        uniq: list = []
        for pair in e["configs"]:
            if pair not in uniq:
                uniq.append(pair)
        e["configs"] = uniq
    return out
