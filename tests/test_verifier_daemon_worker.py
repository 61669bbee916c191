"""vLLM runs the model in daemonic worker processes (multiproc executor), which may not start child processes;
a launch there that finds proofs missing from the cache must still prove them (serially) instead of refusing
with "daemonic processes are not allowed to have children" (seen when a kernel source changed under a running
`vllm serve`)."""
import multiprocessing
from pathlib import Path


def _prove_softmax_catalog(cache_dir: str, out) -> None:
    from vosti_plugin.verifier.api import verify_catalog

    try:
        rows = verify_catalog(kernel="softmax", cache_dir=Path(cache_dir), workers=2)
        out.put(sorted({(r.status, r.cached) for r in rows}))
    except BaseException as exc:   # noqa: BLE001 (the parent reports it)
        out.put(f"{type(exc).__name__}: {exc}")


def test_a_daemonic_process_proves_missing_proofs_in_process(tmp_path):
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    worker = ctx.Process(target=_prove_softmax_catalog, args=(str(tmp_path), out), daemon=True)
    worker.start()
    result = out.get(timeout=600)
    worker.join(60)
    assert result == [("proved", False)], result
    assert list(tmp_path.glob("*.json")), "the proofs are cached for the next launch"
