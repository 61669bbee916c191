"""Contract and catalog of the KV write kernel (vosti_plugin/attention/kv_write.py).

`slot_write`: token t of the left launch and token u of the right launch with equal key/value rows and
valid slots store equal bits into their own slots, whatever the batch (T, other tokens, slot numbers).
`writes_only_its_slots`: every store lands in a slot named by slot_mapping[0:T] (other cache pages,
shared prefix pages included, keep their bits).
"""
from __future__ import annotations

from verifier.contracts import contract, contract_of, goal, tensor

_P = {
    "key_ptr": tensor(("T", "HKV", "HEAD_DIM"), ("stride_kt", "stride_kh", 1)),
    "value_ptr": tensor(("T", "HKV", "HEAD_DIM"), ("stride_vt", "stride_vh", 1)),
    "k_cache_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_kcb", "stride_kcp", "stride_kch", 1)),
    "v_cache_ptr": tensor(("NB", "PAGE_SIZE", "HKV", "HEAD_DIM"), ("stride_vcb", "stride_vcp", "stride_vch", 1)),
    "slot_mapping_ptr": tensor(("SM",), (1,), "int64"),
}


def _side(s: str, t: str) -> tuple[str, ...]:
    slot = f"{s}.slot_mapping_ptr"
    return (f"0 <= {t} < {s}.T", f"{s}.T <= {s}.SM", f"{slot}[{t}] >= 0",
            f"forall(a, 0 <= a < {s}.T, forall(b, 0 <= b < {s}.T, implies(a != b and {slot}[a] >= 0, "
            f"{slot}[a] != {slot}[b])))")


def _cache(s: str, t: str, cache: str) -> str:
    slot = f"{s}.slot_mapping_ptr[{t}]"
    return f"{s}.{cache}[{slot} // PAGE_SIZE, {slot} % PAGE_SIZE, :, :]"


WRITE_KV = contract(
    params=_P,
    grid=("T",),
    verif=[
        goal("slot_write", same=("num_kv_heads", "HKV"),
             pre=("num_kv_heads == HKV", "HKV <= BLOCK_H") + _side("L", "t") + _side("R", "u")
             + ("L.key_ptr[t, :, :] == R.key_ptr[u, :, :]", "L.value_ptr[t, :, :] == R.value_ptr[u, :, :]"),
             post=(f"{_cache('L', 't', 'k_cache_ptr')} == {_cache('R', 'u', 'k_cache_ptr')}",
                   f"{_cache('L', 't', 'v_cache_ptr')} == {_cache('R', 'u', 'v_cache_ptr')}")),
        goal("writes_only_its_slots", same=("num_kv_heads", "HKV"),
             pre=("num_kv_heads == HKV", "L.T <= L.SM"),
             post=(f"forall(t, 0 <= t < L.T, only({_cache('L', 't', 'k_cache_ptr')}))",
                   f"forall(t, 0 <= t < L.T, only({_cache('L', 't', 'v_cache_ptr')}))")),
    ],
    symbolic=("HEAD_DIM", "PAGE_SIZE"),
    assume=("HEAD_DIM >= 1", "PAGE_SIZE >= 1"),
)


def entries() -> list[dict]:
    import triton

    from vosti_plugin.attention import config as cfgmod
    from vosti_plugin.attention import kv_write

    kernel = kv_write._write_kv_kernel
    if contract_of(kernel) is None:
        WRITE_KV(kernel)
    configs = []
    heads = (1, 2, 4, 8, 16, 32)  # KV heads of the served geometries and their TP shards
    for key, cfg in cfgmod.CATALOG:
        for h in heads:
            c = {"HEAD_DIM": key.head_dim, "PAGE_SIZE": key.page_size, "BLOCK_H": triton.next_power_of_2(h)}
            if (c, {"head_dim": key.head_dim, "page_size": key.page_size}) not in configs:
                configs.append((c, {"head_dim": key.head_dim, "page_size": key.page_size}))
    return [{"family": "kv_write", "kernel": kernel, "configs": configs}]
