"""Each kernel launch config compiles once, whatever a step's batch (GPU).

Every Gemma-3-4B engine of session 34 logged `Triton kernel JIT compilation during inference:
_paged_attention_segments_kernel` after vLLM's warm-up (`integration/results/h100-s34/`). The code explains it so:
Triton specializes an integer argument that equals 1 or is a multiple of 16, and a pointer by its divisibility by 16,
so a kernel taking the step's number of sequences as a plain int compiles another kernel the first time a step has 1,
16 or 2 sequences; Gemma's prefill tiles (its decode runs in 16-row tiles) meet only the profile step's batch in
warm-up. The kernels now take `num_seqs` unspecialized, the split workspace starts l and acc 16 bytes apart whatever
the step's size, and a step cut into launches hands each one a block table starting on 16 bytes. These tests count
the compiles Triton reports (`knobs.runtime.jit_post_compile_hook`) over steps of 1-33 sequences on each launch path,
and show the count move for the kernels with `num_seqs` specialized; the layouts are checked on any machine. The
dense ops (GEMM paths, norms) are held to the same over steps of 1-1024 rows."""
import contextlib

import pytest
import torch

from vosti_plugin.attention import paged_attention as kernels
from vosti_plugin.attention.config import decode_config, fold_config, prefill_config, select_config
from vosti_plugin.attention.paged_batch import build_paged_batch, random_request, run_paged_batch

BATCHES = (2, 1, 16, 3, 32, 33)   # generic, 1, multiple of 16: each a variant where num_seqs is specialized


@contextlib.contextmanager
def _compiles():
    """The kernel names Triton compiles inside the block, one entry per compile, with the argument types."""
    import triton

    seen: list[str] = []
    previous = triton.knobs.runtime.jit_post_compile_hook

    def hook(*, repr, **_):
        seen.append(repr)
        return previous(repr=repr, **_) if previous else None

    triton.knobs.runtime.jit_post_compile_hook = hook
    try:
        yield seen
    finally:
        triton.knobs.runtime.jit_post_compile_hook = previous


def _launches(head_dim, q_heads, kv_heads, window):
    """(name, config, kwargs of run_paged_batch, query rows a sequence) of every path a deployment launches."""
    config = select_config(head_dim, q_heads, kv_heads, 64, torch.bfloat16)
    common = {"sliding_window": window}
    return [
        ("prefill, split", config, {**common, "path": "split"}, 40),
        ("decode tiles, split", decode_config(config, 16), {**common, "path": "split"}, 1),
        ("decode, FOLD combine", config, {**common, "path": "split", "fold": fold_config(config, head_dim)}, 1),
        ("prefill, fused", prefill_config(config, head_dim, 64), {**common, "path": "fused"}, 40),
    ]


def _compiles_after_the_first_step(head_dim, q_heads, kv_heads, window):
    """{path: compiles seen in the steps after each path's first} over steps of BATCHES sequences."""
    after = {}
    for name, config, kwargs, q_len in _launches(head_dim, q_heads, kv_heads, window):
        counts = []
        for b, num_seqs in enumerate(BATCHES):
            requests = [random_request(300 + 37 * s, q_len, q_heads, kv_heads, head_dim, seed=b * 100 + s,
                                       dtype=torch.bfloat16, device="cuda") for s in range(num_seqs)]
            width = 40 - max(-(-r.kv_len // 64) for r in requests)   # vLLM's block table: one width a deployment
            batch = build_paged_batch(requests, page_size=64, seed=b, spare_table_columns=width)
            with _compiles() as seen:
                run_paged_batch(batch, config, scale=head_dim ** -0.5, **kwargs)
                torch.cuda.synchronize()
            counts.append(seen)
        after[name] = [r for seen in counts[1:] for r in seen]
    return after


# Llama-3.1-8B heads; Gemma-3-4B's window layer; Qwen2.5-0.5B's 14 query heads (a step of an odd number of tokens and
# segments has an odd number of partial rows: where the workspace puts l and acc must not follow it)
GEOMETRIES = [(128, 32, 8, None), (256, 8, 4, 1024), (64, 14, 2, None)]


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, q_heads, kv_heads, window", GEOMETRIES)
def test_gpu_attention_compiles_once_whatever_the_batch(head_dim, q_heads, kv_heads, window):
    after = _compiles_after_the_first_step(head_dim, q_heads, kv_heads, window)
    assert after == {name: [] for name in after}, after


@pytest.mark.gpu
def test_gpu_a_kernel_that_specializes_the_batch_compiles_again(monkeypatch):
    """The count can move: the same kernels with num_seqs specialized compile again as the batch changes."""
    import triton

    for attr in ("_paged_attention_segments_kernel", "_combine_segments_kernel"):
        shipped = getattr(kernels, attr)
        monkeypatch.setattr(kernels, attr, triton.jit(shipped.fn, do_not_specialize=["num_segments"]))
    after = _compiles_after_the_first_step(*GEOMETRIES[0])
    assert all(after.values()), after


def test_the_split_workspace_starts_l_and_acc_on_16_bytes_whatever_the_step(monkeypatch):
    """CPU: the partials' pointers the segments kernel gets, for steps whose partial rows are odd."""
    seen = []

    def record(*args, **kwargs):
        part_m, part_l, part_acc = args[8:11]
        seen.append((part_m.data_ptr(), part_l.data_ptr(), part_acc.data_ptr(), part_m.numel()))

    monkeypatch.setattr(kernels, "_launch_segments", record)
    config = select_config(32, 14, 2, 16, torch.float32)
    for num_seqs in (1, 3):
        requests = [random_request(20 + s, 1, 14, 2, 32, seed=s) for s in range(num_seqs)]
        batch = build_paged_batch(requests, page_size=16)
        workspace = torch.empty(10_000, dtype=torch.float32)
        run_paged_batch(batch, config, scale=0.3, workspace=workspace)
    assert any(rows % 4 for *_, rows in seen)   # steps whose rows alone would not keep 16 bytes
    for m, l, acc, rows in seen:
        assert (l - m) % 16 == 0 and (acc - m) % 16 == 0 and l - m >= 4 * rows and acc - l >= 4 * rows


def test_launches_of_a_step_get_block_tables_on_16_bytes():
    """CPU: a step cut into launches (split workspace bound) hands each launch a block table starting on 16 bytes,
    also where the table's width (vLLM's: max_model_len / page) is not a multiple of 4 entries."""
    from vosti_plugin.attention.sub_launch import run_in_launches

    requests = [random_request(30 + s, 3, 4, 2, 16, seed=s) for s in range(5)]
    batch = build_paged_batch(requests, page_size=8, spare_table_columns=3)   # 5 + 3 = 8 columns ...
    table = torch.zeros(5, 9, dtype=torch.int32)                                # ... widened to an odd 9
    table[:, :batch.block_table.shape[1]] = batch.block_table
    seen = []

    def launch(q, out, block_table, seq_lens, query_start_loc):
        seen.append((block_table.data_ptr() % 16, block_table.tolist()))

    run_in_launches(launch, batch.q, batch.empty_out(), table, batch.seq_lens, batch.query_start_loc.tolist(), 3)
    assert len(seen) == 5 and all(offset == 0 for offset, _ in seen), seen
    assert [rows for _, rows in seen] == [[r] for r in table.tolist()]   # the same entries, one sequence a launch


@pytest.mark.gpu
# Qwen3-0.6B o_proj, Gemma-3-4B qkv_proj, Qwen2.5-7B up_proj
@pytest.mark.parametrize("n, k", [(1024, 2048), (4096, 2560), (18944, 3584)])
def test_gpu_dense_ops_compile_once_per_gemm_path(n, k):
    """A step of M rows after one of the same GEMM path (decode, mid or tall tiles) compiles nothing."""
    from vosti_plugin.ops import matmul
    from vosti_plugin.ops.rmsnorm import rms_norm

    gen = torch.Generator(device="cuda").manual_seed(0)
    w = (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(torch.bfloat16)
    norm_w = torch.randn(k, device="cuda", generator=gen).to(torch.bfloat16)
    config = matmul.select_config(n, k, torch.bfloat16)
    seen_paths, late = set(), {}
    for m in (1, 2, 16, 17, 33, 64, 100, 128, 255, 256, 512, 600, 1000, 1024):
        x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        path = matmul.launch_path(m, config, torch.bfloat16, (x, w.t()))
        with _compiles() as seen:
            matmul.linear(rms_norm(x, norm_w, 1e-6), w)
            torch.cuda.synchronize()
        if path in seen_paths and seen:
            late[m] = seen
        seen_paths.add(path)
    assert len(seen_paths) >= 2 and late == {}, late
