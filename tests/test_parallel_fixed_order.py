"""The TP all-reduce vosti installs (all-gather + rank-order sum) gives every row the same bits however
the batch is split, over real torch.distributed (gloo, 3 processes); gloo's own all-reduce is the control."""
from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vosti_plugin.parallel.fixed_order import all_reduce, fixed_order_sum

WORLD = 3
ROWS, WIDTH = 37, 96
SPLITS = (1, 5, 16, 36)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _partial(rank: int) -> torch.Tensor:
    # partials of a row-parallel GEMM: same magnitude on every rank, so the summation order shows in the bits
    return torch.randn(ROWS, WIDTH, generator=torch.Generator().manual_seed(100 + rank)) * 1e3


def _gather(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty((WORLD * t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype)
    dist.all_gather_into_tensor(out, t.contiguous())
    return out


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        x = _partial(rank)
        results = {"fixed_whole": all_reduce(x, _gather)}
        stock = x.clone()
        dist.all_reduce(stock)
        results["stock_whole"] = stock
        for split in SPLITS:
            head, tail = x[:split], x[split:]
            results[f"fixed_{split}"] = torch.cat([all_reduce(head, _gather), all_reduce(tail, _gather)])
            parts = [head.clone(), tail.clone()]
            for part in parts:
                dist.all_reduce(part)
            results[f"stock_{split}"] = torch.cat(parts)
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    out = tmp_path_factory.mktemp("gloo")
    mp.start_processes(_worker, args=(_free_port(), str(out)), nprocs=WORLD, start_method="spawn")
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_fixed_order_all_reduce_is_the_rank_order_sum_on_every_rank(reduced):
    expected = fixed_order_sum(torch.stack([_partial(r) for r in range(WORLD)]))
    assert _same_bits(expected, (_partial(0) + _partial(1)) + _partial(2))
    for rank in range(WORLD):
        assert _same_bits(reduced[rank]["fixed_whole"], expected)


@pytest.mark.parametrize("split", SPLITS)
def test_fixed_order_all_reduce_does_not_see_the_batch_split(reduced, split):
    for rank in range(WORLD):
        assert _same_bits(reduced[rank][f"fixed_{split}"], reduced[rank]["fixed_whole"])


def test_gloo_all_reduce_sees_the_batch_split(reduced):
    """The control: gloo's ring picks each element's summation order by its place in the message."""
    differing = [s for s in SPLITS if not _same_bits(reduced[0][f"stock_{s}"], reduced[0]["stock_whole"])]
    assert differing, "gloo gave the same bits for every split: this test could not show the difference"
