"""Contracts and catalogs of the shipped dense-op kernels (vosti_plugin/ops).

The contracts are attached here, next to nothing: they belong right above each `@triton.jit` in the op
modules (same text), which their authors own; `attach()` is idempotent and a kernel that already carries
a contract keeps its own.
"""
from __future__ import annotations

from typing import Any

from verifier.contracts import contract, contract_of, goal, scalar, tensor

ROW_PRE = ("R.M == 1", "0 <= x < L.M")

MM = contract(
    params={"a_ptr": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b_ptr": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "bias_ptr": tensor(("N",), (1,)),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("row_invariance", same=("N", "K"),
                pre=ROW_PRE + ("L.a_ptr[x, :] == R.a_ptr[0, :]", "L.b_ptr[:, :] == R.b_ptr[:, :]",
                               "L.bias_ptr[:] == R.bias_ptr[:]"),
                post=("L.c_ptr[x, :] == R.c_ptr[0, :]",))],
)

# part is the [SPLIT_K, M, N] fp32 workspace seen as [SPLIT_K * M, N] with row stride N.
MM_SPLITK_PARTIAL = contract(
    params={"a_ptr": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b_ptr": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "part_ptr": tensor(("PR", "N"), ("N", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "SPLIT_K"),
    verif=[goal("row_invariance", same=("N", "K", "K_PER_SPLIT"),
                pre=ROW_PRE + ("L.a_ptr[x, :] == R.a_ptr[0, :]", "L.b_ptr[:, :] == R.b_ptr[:, :]"),
                post=("forall(s, 0 <= s < SPLIT_K, L.part_ptr[s * L.M + x, :] == R.part_ptr[s * R.M, :])",))],
)

MM_SPLITK_COMBINE = contract(
    params={"part_ptr": tensor(("PR", "N"), ("N", 1)),
            "bias_ptr": tensor(("N",), (1,)),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("row_invariance", same=("N",),
                pre=ROW_PRE + ("forall(s, 0 <= s < SPLIT_K, L.part_ptr[s * L.M + x, :] == R.part_ptr[s * R.M, :])",
                               "L.bias_ptr[:] == R.bias_ptr[:]"),
                post=("L.c_ptr[x, :] == R.c_ptr[0, :]",))],
)

RMS_NORM = contract(
    params={"x_ptr": tensor(("M", "H"), ("stride_x", 1)), "res_ptr": tensor(("M", "H"), ("stride_res", 1)),
            "w_ptr": tensor(("H",), (1,)), "y_ptr": tensor(("M", "H"), ("stride_y", 1)),
            "res_out_ptr": tensor(("M", "H"), ("stride_res_out", 1)), "eps": scalar("float32")},
    grid=("M",),
    verif=[goal("row_invariance", same=("H", "eps"),
                pre=ROW_PRE + ("L.x_ptr[x, :] == R.x_ptr[0, :]", "L.res_ptr[x, :] == R.res_ptr[0, :]",
                               "L.w_ptr[:] == R.w_ptr[:]"),
                post=("L.y_ptr[x, :] == R.y_ptr[0, :]",))],
)
RMS_NORM_RESIDUAL_POST = "L.res_out_ptr[x, :] == R.res_out_ptr[0, :]"

SOFTMAX = contract(
    params={"x_ptr": tensor(("M", "V"), ("stride_x", 1)), "y_ptr": tensor(("M", "V"), ("stride_y", 1))},
    grid=("M",),
    verif=[goal("row_invariance", same=("V",), pre=ROW_PRE + ("L.x_ptr[x, :] == R.x_ptr[0, :]",),
                post=("L.y_ptr[x, :] == R.y_ptr[0, :]",))],
)

MEAN = contract(
    params={"x_ptr": tensor(("M", "V"), ("stride_x", 1)), "y_ptr": tensor(("M",), (1,))},
    grid=("M",),
    verif=[goal("row_invariance", same=("V",), pre=ROW_PRE + ("L.x_ptr[x, :] == R.x_ptr[0, :]",),
                post=("L.y_ptr[x] == R.y_ptr[0]",))],
)


def _attach(kernel: Any, spec) -> Any:
    if contract_of(kernel) is None:
        spec(kernel)
    return kernel


def _dedupe(configs: list[dict]) -> list[dict]:
    out: list[dict] = []
    for c in configs:
        if c not in out:
            out.append(c)
    return out


def entries() -> list[dict]:
    """Every shipped dense kernel with its contract and the constexpr configs its catalog can launch."""
    import dataclasses

    import torch

    from vosti_plugin.ops import matmul, rmsnorm, softmax

    mm_cfgs = [(cfg, "ieee" if dt == "float32" else "tf32") for (_n, _k, dt), cfg in matmul.CATALOG.items()]
    mm_cfgs += [(matmul.rule_config(4096, 4096, torch.float32), "ieee")]
    out: list[dict] = []
    plain, split = [], []
    for cfg, prec in mm_cfgs:
        fam = dataclasses.asdict(cfg)
        base = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "DOT_PRECISION": prec}
        if cfg.split_k == 1:
            plain += [({**base, "HAS_BIAS": hb}, fam) for hb in (False, True)]
        else:
            split.append(({**base, "SPLIT_K": cfg.split_k}, fam))
    out.append({"family": "matmul", "kernel": _attach(matmul.mm_kernel, MM), "configs": plain})
    out.append({"family": "matmul", "kernel": _attach(matmul.mm_splitk_partial_kernel, MM_SPLITK_PARTIAL),
                "configs": split})
    combine = [({"HAS_BIAS": hb, "SPLIT_K": c["SPLIT_K"], "BLOCK_M": matmul._COMBINE_BLOCK_M,
                 "BLOCK_N": matmul._COMBINE_BLOCK_N}, fam) for c, fam in split for hb in (False, True)]
    out.append({"family": "matmul", "kernel": _attach(matmul.splitk_combine_kernel, MM_SPLITK_COMBINE),
                "configs": combine})
    hidden = (4096, 2560, 128, 256)
    rms = [({"BLOCK": rmsnorm.select_config(h).block, "HAS_RESIDUAL": r, "WEIGHT_MODE": w}, {"hidden": h})
           for h in hidden for r in (False, True) for w in (0, 1, 2)]
    out.append({"family": "rms_norm", "kernel": _attach(rmsnorm.rms_norm_kernel, RMS_NORM), "configs": rms,
                "extra_post": {"HAS_RESIDUAL": RMS_NORM_RESIDUAL_POST}})
    widths = (128256, 151936, 262208, 4096, 2560)
    out.append({"family": "softmax", "kernel": _attach(softmax.softmax_kernel, SOFTMAX),
                "configs": [({"BLOCK": softmax.select_config(v).block, "LOG": lg}, {"n_cols": v})
                            for v in widths for lg in (False, True)]})
    out.append({"family": "softmax", "kernel": _attach(softmax.mean_kernel, MEAN),
                "configs": [({"BLOCK": softmax.select_config(v).block}, {"n_cols": v}) for v in widths]})
    for e in out:
        uniq: list = []
        for pair in e["configs"]:
            if pair not in uniq:
                uniq.append(pair)
        e["configs"] = uniq
    return out
