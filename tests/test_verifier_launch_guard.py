"""The runtime launch guard: a launch whose constexpr config is not proved raises before it runs, the
shipped wrappers' launches pass against their catalogs, and the verifier checks that every shipped launch
is guarded with its own values (obligation launch-guard)."""
import dataclasses
import inspect

import pytest
import torch

from vosti_plugin.verifier.api import catalog_entries, verify_catalog
from vosti_plugin.verifier.launch import check_module_source
from vosti_plugin.verifier.report import Result
from vosti_plugin.attention import config as attention_config
from vosti_plugin.attention import kv_write, paged_attention
from vosti_plugin.launch import guard
from vosti_plugin.ops import activation, matmul, rmsnorm, softmax


@pytest.fixture
def armed():
    yield guard
    guard.disarm()


def _all_proved() -> list[Result]:
    """Rows marking every catalog config and every host module proved (to test the keys, not the proofs)."""
    rows = [Result(e["kernel"].fn.__name__, cfg, "g", "proved", "", 0, "", 0.0)
            for e in catalog_entries() for cfg, _ in e["configs"]]
    mods = {e["kernel"].fn.__module__.rsplit(".", 1)[-1] for e in catalog_entries()}
    return rows + [Result(f"launch:{m}", {}, "launches_match_proofs", "proved", "", 0, "", 0.0) for m in mods]


def _attention_inputs(head_dim=64, q_heads=8, kv_heads=2, page=16, seqs=(5, 3)):
    torch.manual_seed(0)
    T = sum(seqs)
    q = torch.randn(T, q_heads, head_dim)
    blocks = sum(-(-s // page) for s in seqs) + 1
    k = torch.randn(blocks, page, kv_heads, head_dim)
    v = torch.randn(blocks, page, kv_heads, head_dim)
    table, b = [], 0
    width = max(-(-s // page) for s in seqs)
    for s in seqs:
        n = -(-s // page)
        table.append(list(range(b, b + n)) + [0] * (width - n))
        b += n
    bt = torch.tensor(table, dtype=torch.int32)
    lens = torch.tensor(seqs, dtype=torch.int32)
    qsl = torch.tensor([0, *torch.cumsum(lens, 0).tolist()], dtype=torch.int32)
    cfg = attention_config.select_config(head_dim, q_heads, kv_heads, page, torch.float32)
    return q, k, v, bt, lens, qsl, cfg


def test_shipped_launches_pass_the_guard(armed):
    armed.arm(_all_proved())
    x = torch.randn(3, 256)
    rmsnorm.rms_norm(x, torch.ones(256), 1e-6)
    rmsnorm.fused_add_rms_norm(x, x.clone(), torch.ones(256), 1e-6)
    softmax.softmax(torch.randn(3, 1000))
    softmax.log_softmax(torch.randn(2, 5000))
    softmax.mean_last_dim(torch.randn(2, 300))
    activation.silu_and_mul(torch.randn(3, 64))
    a, b = torch.randn(5, 64), torch.randn(64, 48)
    plain = next(e for e in matmul.verifier_catalog() if e["kernel"] is matmul.mm_kernel)
    for c, fam in plain["configs"][:2]:
        if c["DOT_PRECISION"] == "ieee":
            matmul.launch_matmul(a, b, None, torch.empty(5, 48), matmul.MatmulConfig(**fam))
    entry = next(e for e in matmul.verifier_catalog() if e["kernel"] is matmul.mm_splitk_partial_kernel)
    split = matmul.MatmulConfig(**entry["configs"][0][1])   # 16-bit only: launched on bf16 operands
    bf = torch.bfloat16
    matmul.launch_matmul(torch.randn(3, 512, dtype=bf), torch.randn(512, 32, dtype=bf), torch.randn(32, dtype=bf),
                         torch.empty(3, 32, dtype=bf), split)
    q, k, v, bt, lens, qsl, cfg = _attention_inputs()
    for path in ("split", "fused"):
        paged_attention.paged_attention(q, k, v, bt, lens, qsl, torch.empty_like(q), scale=0.125, config=cfg,
                                        path=path, sliding_window=4 if path == "fused" else None)
    key = torch.randn(2, 2, 64)
    kv_write.write_kv(key, key.clone(), k, v, torch.tensor([3, -1]))


def test_a_config_outside_the_proved_set_raises_before_launching(armed):
    plain = next(e for e in matmul.verifier_catalog() if e["kernel"] is matmul.mm_kernel)
    dropped, fam = next((c, fam) for c, fam in plain["configs"] if c["DOT_PRECISION"] == "ieee" and not c["HAS_BIAS"])
    armed.arm([r for r in _all_proved() if not (r.kernel == "mm_kernel" and r.config == dropped)])
    odd = matmul.MatmulConfig(block_m=16, block_n=16, block_k=16, split_k=1)   # in no catalog
    out = torch.full((4, 16), 7.0)
    with pytest.raises(guard.UnprovedLaunch) as e:
        matmul.launch_matmul(torch.randn(4, 32), torch.randn(32, 16), None, out, odd)
    assert "mm_kernel" in str(e.value) and "'BLOCK_K': 16" in str(e.value)
    assert torch.all(out == 7.0), "the kernel ran although the guard refused it"
    with pytest.raises(guard.UnprovedLaunch):   # in the catalog, but its proof is not among the results
        matmul.launch_matmul(torch.randn(4, 32), torch.randn(32, 16), None, out, matmul.MatmulConfig(**fam))
    matmul.launch_matmul(torch.randn(4, 32), torch.randn(32, 16), torch.zeros(16), out, matmul.MatmulConfig(**fam))


def test_a_failed_host_launch_check_unproves_the_module(armed):
    rows = [dataclasses.replace(r, status="failed") if r.kernel == "launch:rmsnorm" else r for r in _all_proved()]
    armed.arm(rows)
    with pytest.raises(guard.UnprovedLaunch, match="rms_norm_kernel"):
        rmsnorm.rms_norm(torch.randn(2, 64), torch.ones(64), 1e-6)
    activation.silu_and_mul(torch.randn(2, 64))   # other modules unaffected


def test_guard_against_real_proofs(armed, tmp_path):
    rows = verify_catalog(kernel="act_and_mul_kernel", cache_dir=tmp_path, workers=1)
    rows += verify_catalog(kernel="launch:activation", cache_dir=tmp_path, workers=1)
    assert rows and all(r.status == "proved" for r in rows), [r for r in rows if r.status != "proved"]
    armed.arm(rows)
    activation.silu_and_mul(torch.randn(2, 64))
    with pytest.raises(guard.UnprovedLaunch, match="softmax_kernel"):
        softmax.softmax(torch.randn(2, 64))


def test_unarmed_guard_lets_launches_through():
    guard.disarm()
    rmsnorm.rms_norm(torch.randn(2, 64), torch.ones(64), 1e-6)


@pytest.mark.parametrize("edit, what", [
    ("        guard.check(mm_kernel, tiles, HAS_BIAS=bias is not None, DOT_PRECISION=precision, BLOCK_M=config.block_m,\n",
     "removed"),
    ("BLOCK_N=config.block_n, BLOCK_K=config.block_k)\n        mm_kernel[tiles](", "value"),
    ("guard.check(mm_kernel, tiles,", "grid"),
])
def test_verifier_rejects_a_launch_the_guard_does_not_see(edit, what):
    src = inspect.getsource(matmul)
    assert edit in src, "the guarded launch changed; update this mutation"
    if what == "removed":
        i = src.index(edit)
        j = src.index("\n", src.index("\n", i) + 1)
        mutated = src[:i] + "        pass\n" + src[j + 1:]
    elif what == "value":
        mutated = src.replace(edit, edit.replace("BLOCK_K=config.block_k)", "BLOCK_K=config.block_n)"))
    else:
        mutated = src.replace(edit, "guard.check(mm_kernel, (1, 1),")
    contracts = {e["kernel"].fn.__name__: e["kernel"].__vosti_contract__ for e in matmul.verifier_catalog()}
    assert check_module_source(src, "matmul.py", contracts, require_guard=True) == []
    found = check_module_source(mutated, "matmul.py", contracts, require_guard=True)
    assert found and all(f.obligation == "launch-guard" and f.kernel == "mm_kernel" for f in found), found


@pytest.mark.parametrize("env, extra, on", [
    ({"VOSTI_AUDIT": "1"}, None, True),
    ({}, {"vosti": {"audit": True}}, True),
    ({"VOSTI_LAUNCH_GUARD": "1", "VOSTI_AUDIT": "0"}, None, True),
    ({"VOSTI_AUDIT": "1", "VOSTI_LAUNCH_GUARD": "0"}, {"vosti": {"audit": True}}, False),
    ({"VOSTI_AUDIT": "0"}, None, False),
])
def test_audit_mode_turns_the_guard_on(monkeypatch, env, extra, on):
    for name in ("VOSTI_AUDIT", guard.ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert guard.requested(extra) is on


def test_suspended_guard_restores_its_state(armed):
    armed.arm(_all_proved())
    odd = matmul.MatmulConfig(block_m=16, block_n=16, block_k=16, split_k=1)   # in no catalog
    with guard.suspended():
        matmul.launch_matmul(torch.randn(4, 32), torch.randn(32, 16), None, torch.empty(4, 16), odd)
    assert guard.armed()
    with pytest.raises(guard.UnprovedLaunch):
        matmul.launch_matmul(torch.randn(4, 32), torch.randn(32, 16), None, torch.empty(4, 16), odd)
    assert ("mm_kernel", {"BLOCK_K": 16, "BLOCK_M": 16, "BLOCK_N": 16, "DOT_PRECISION": "ieee",
                          "HAS_BIAS": False}) not in guard.checked()


def test_the_guard_reads_the_verification_of_the_catalog_switches_in_force(armed, monkeypatch):
    """A process that armed the guard under VOSTI_ATTENTION_ROW_SUMS=dot and later under the default (a test run's
    worker, or an offline check before an engine) checks each launch against its own mode's proved set."""
    from vosti_plugin.verifier import api

    monkeypatch.setattr(guard, "_from_cache", {})
    monkeypatch.setattr(api, "cached_results", _all_proved)   # the catalog of the switches in force, all proved
    q, k, v, bt, lens, qsl, _ = _attention_inputs()
    for mode in ("dot", "sum", "dot"):
        monkeypatch.setenv("VOSTI_ATTENTION_ROW_SUMS", mode)
        cfg = attention_config.select_config(64, 8, 2, 16, torch.float32)
        assert cfg.row_sums_by_dot == (mode == "dot")
        armed.arm()
        paged_attention.paged_attention(q, k, v, bt, lens, qsl, torch.empty_like(q), scale=0.125, config=cfg)
        other = dataclasses.replace(cfg, row_sums_by_dot=mode != "dot")
        with pytest.raises(guard.UnprovedLaunch, match="ROW_SUMS_BY_DOT"):
            paged_attention.paged_attention(q, k, v, bt, lens, qsl, torch.empty_like(q), scale=0.125, config=other)
    assert len(guard._from_cache) == 2
