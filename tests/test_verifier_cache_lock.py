"""Engine processes that start together with a cold proof cache (a server's workers, a test run's engines) prove
one at a time into it: a process that waited reads what the other proved instead of proving it again."""
import multiprocessing
from pathlib import Path


def _prove_rms_norm(cache_dir: str, out) -> None:
    from vosti_plugin.verifier.api import verify_catalog

    try:
        rows = [r for r in verify_catalog(kernel="rms_norm", cache_dir=Path(cache_dir), workers=1)
                if not r.kernel.startswith("launch:")]
        out.put((len(rows), sum(r.status == "proved" for r in rows), sum(not r.cached for r in rows)))
    except BaseException as exc:   # noqa: BLE001 (the parent reports it)
        out.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_on_a_cold_cache_prove_each_group_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    workers = [ctx.Process(target=_prove_rms_norm, args=(str(tmp_path), out)) for _ in range(2)]
    for w in workers:
        w.start()
    results = sorted(out.get(timeout=600) for _ in workers)
    for w in workers:
        w.join(60)
    assert all(isinstance(r, tuple) for r in results), results
    (rows_a, proved_a, fresh_a), (rows_b, proved_b, fresh_b) = results
    assert rows_a == rows_b == proved_a == proved_b > 0, results
    assert (fresh_a, fresh_b) == (0, rows_b), f"rows proved here (not read from the cache) per process: {results}"
