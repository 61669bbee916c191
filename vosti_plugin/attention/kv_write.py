"""Write new K/V rows into their paged cache slots."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor
from vosti_plugin.launch import guard
from vosti_plugin.ops import dependent_launch
from vosti_plugin.triton_mode import use_lane_invariant_interpreter

use_lane_invariant_interpreter()


# Relational contract, proved by `vosti verify` (vosti_plugin/verifier/).  slot_write: token t of the left launch and
# token u of the right launch with equal key/value rows and valid slots store equal bits into their own
# slots, whatever the batch (T, other tokens, slot numbers).  writes_only_its_slots: every store lands in
# a valid (>= 0) slot named by slot_mapping[0:T] (other pages, shared prefix pages included, keep their
# bits; a padding token, slot -1, writes nothing).
_WRITE_KV_TENSORS = {
    "key_ptr": tensor(("T", "HKV", "HEAD_DIM"), ("stride_kt", "stride_kh", 1)),
    "value_ptr": tensor(("T", "HKV", "HEAD_DIM"), ("stride_vt", "stride_vh", 1)),
    "k_cache_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_kcb", "stride_kcp", "stride_kch", 1)),
    "v_cache_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_vcb", "stride_vcp", "stride_vch", 1)),
    "slot_mapping_ptr": tensor(("SM",), (1,), "int64"),
}
_DISTINCT_SLOTS = ("forall(a, 0 <= a < {s}.T, forall(b, 0 <= b < {s}.T, implies(a != b and "
                   "{s}.slot_mapping_ptr[a] >= 0, {s}.slot_mapping_ptr[a] != {s}.slot_mapping_ptr[b])))")
_SLOT = "{s}.{cache}[{s}.slot_mapping_ptr[{t}] // PAGE_SIZE, {s}.slot_mapping_ptr[{t}] % PAGE_SIZE, :, :]"
# every launch: slots name cache rows (or are -1, padding); head offsets are formed in int32
_WELL_FORMED = tuple(c.format(s=s) for s in "LR" for c in (
    "forall(a, 0 <= a < {s}.T, {s}.slot_mapping_ptr[a] < {s}.NB * PAGE_SIZE)",
    "(HKV - 1) * {s}.stride_kh < 2147483648", "(HKV - 1) * {s}.stride_vh < 2147483648",
    "(HKV - 1) * {s}.stride_kch < 2147483648", "(HKV - 1) * {s}.stride_vch < 2147483648"))


@contract(
    params=_WRITE_KV_TENSORS,
    grid=("T",),
    verif=[
        goal("slot_write", same=("num_kv_heads", "HKV"),
             pre=("num_kv_heads == HKV", "HKV <= BLOCK_H",
                  "0 <= t < L.T", "L.T <= L.SM", "L.slot_mapping_ptr[t] >= 0", _DISTINCT_SLOTS.format(s="L"),
                  "0 <= u < R.T", "R.T <= R.SM", "R.slot_mapping_ptr[u] >= 0", _DISTINCT_SLOTS.format(s="R"),
                  "L.key_ptr[t, :, :] == R.key_ptr[u, :, :]", "L.value_ptr[t, :, :] == R.value_ptr[u, :, :]"),
             post=tuple(f"{_SLOT.format(s='L', t='t', cache=c)} == {_SLOT.format(s='R', t='u', cache=c)}"
                        for c in ("k_cache_ptr", "v_cache_ptr"))),
        goal("writes_only_its_slots", same=("num_kv_heads", "HKV"),
             pre=("num_kv_heads == HKV", "L.T <= L.SM"),
             post=tuple(f"forall(t, 0 <= t < L.T and L.slot_mapping_ptr[t] >= 0, "
                        f"only({_SLOT.format(s='L', t='t', cache=c)}))"
                        for c in ("k_cache_ptr", "v_cache_ptr"))),
    ],
    symbolic=("HEAD_DIM", "HEAD_DIM_PAD", "PAGE_SIZE", "BLOCK_H"),
    bounds=_WELL_FORMED,
    assume=("HEAD_DIM >= 1", "HEAD_DIM_PAD >= HEAD_DIM", "PAGE_SIZE >= 1", "BLOCK_H >= 1"),
)
@triton.jit
def _write_kv_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    num_kv_heads,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_kcb,
    stride_kcp,
    stride_kch,
    stride_vcb,
    stride_vcp,
    stride_vch,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    if slot < 0:
        return
    page = slot // PAGE_SIZE
    in_page = slot % PAGE_SIZE
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, HEAD_DIM_PAD)
    mask = (heads < num_kv_heads)[:, None] & (dims < HEAD_DIM)[None, :]
    row = token.to(tl.int64)
    key = tl.load(key_ptr + row * stride_kt + heads[:, None] * stride_kh + dims[None, :], mask=mask)
    value = tl.load(value_ptr + row * stride_vt + heads[:, None] * stride_vh + dims[None, :], mask=mask)
    k_slot = k_cache_ptr + page * stride_kcb + in_page * stride_kcp
    v_slot = v_cache_ptr + page * stride_vcb + in_page * stride_vcp
    tl.store(k_slot + heads[:, None] * stride_kch + dims[None, :], key.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_slot + heads[:, None] * stride_vch + dims[None, :], value.to(v_cache_ptr.dtype.element_ty), mask=mask)


def write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Copy key[t], value[t] into slot slot_mapping[t] (= block * page_size + offset); slot -1 is skipped.

    key, value: [tokens, kv_heads, head_dim]; k_cache, v_cache: [blocks, page_size, kv_heads, head_dim]
    (strided views allowed). Only the first key.shape[0] entries of slot_mapping are used.
    """
    if key.dim() != 3 or value.shape != key.shape:
        raise ValueError(f"key/value must be [tokens, kv_heads, head_dim]; got {key.shape}, {value.shape}")
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape or k_cache.shape[2:] != key.shape[1:]:
        raise ValueError(f"cache shape {k_cache.shape} does not match key rows {key.shape[1:]}")
    if slot_mapping.dim() != 1 or slot_mapping.shape[0] < key.shape[0]:
        raise ValueError(f"slot_mapping must have >= {key.shape[0]} entries; got {tuple(slot_mapping.shape)}")
    for name, tensor in (("key", key), ("value", value), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in head_dim")
    num_tokens, num_kv_heads, head_dim = key.shape
    if num_tokens == 0:
        return
    pdl = dependent_launch.enabled(k_cache)
    guard.check(_write_kv_kernel, (num_tokens,), HEAD_DIM=head_dim, HEAD_DIM_PAD=triton.next_power_of_2(head_dim),
                PAGE_SIZE=k_cache.shape[1], BLOCK_H=triton.next_power_of_2(num_kv_heads))
    _write_kv_kernel[(num_tokens,)](
        key, value, k_cache, v_cache, slot_mapping,
        num_kv_heads,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=triton.next_power_of_2(head_dim),
        PAGE_SIZE=k_cache.shape[1],
        BLOCK_H=triton.next_power_of_2(num_kv_heads),
        PDL=pdl,
        num_warps=4,
        launch_pdl=pdl,
    )


# KV heads of the served geometries and their TP shards (the catalog's BLOCK_H values)
_SERVED_KV_HEADS = (1, 2, 4, 8, 16, 32)


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: the constexpr configs `write_kv` launches for the geometries
    of the attention catalog."""
    from vosti_plugin.attention import config as cfgmod

    configs: list[tuple[dict, dict]] = []
    for key, _cfg in cfgmod.CATALOG:
        for h in _SERVED_KV_HEADS:
            c = {"HEAD_DIM": key.head_dim, "HEAD_DIM_PAD": triton.next_power_of_2(key.head_dim),
                 "PAGE_SIZE": key.page_size, "BLOCK_H": triton.next_power_of_2(h)}
            fam = {"head_dim": key.head_dim, "page_size": key.page_size}
            if (c, fam) not in configs:
                configs.append((c, fam))
    return [{"family": "kv_write", "kernel": _write_kv_kernel, "configs": configs}]
