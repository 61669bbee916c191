"""`compare(...)`: run every (model, mode) in its own worker process, compare the evidence bitwise,
aggregate, and write results.md / summary.json / results.json / match_rate.png under out_dir."""
from __future__ import annotations

from vosti_plugin.integration import SOURCE_ROOT
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from vosti_plugin.integration.harness import engine, models as model_specs, report
from vosti_plugin.integration.harness.gpu_share import DEFAULT_KV_GIB
from vosti_plugin.integration.harness.compare import CLASS_ORDER, ClassTally, Comparison, compare_pair, tally
from vosti_plugin.integration.harness.online import OnlineResult, run_online
from vosti_plugin.integration.harness.scale import get as get_scale
from vosti_plugin.integration.harness.worker import PROGRESS_PREFIX

REPO_ROOT = SOURCE_ROOT


@dataclass
class ModeResult:
    mode: str
    label: str
    model: str
    status: str                         # ok | error | unavailable | timeout | missing
    reason: str | None = None
    tallies: dict[str, ClassTally] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    sanity: dict | None = None
    engine: dict | None = None
    redraw: dict | None = None
    startup_s: float = 0.0
    timings_s: dict[str, float] = field(default_factory=dict)
    vllm_version: str | None = None

    @property
    def mismatches(self) -> int:
        return sum(t.compared - t.matches for t in self.tallies.values())

    @property
    def compared(self) -> int:
        return sum(t.compared for t in self.tallies.values())

    def to_json(self) -> dict:
        return {
            "mode": self.mode, "label": self.label, "model": self.model, "status": self.status,
            "reason": self.reason, "sanity": self.sanity, "engine": self.engine, "redraw": self.redraw,
            "startup_s": self.startup_s, "timings_s": self.timings_s, "vllm_version": self.vllm_version,
            "tallies": {c: {"matches": t.matches, "compared": t.compared, "not_run": t.not_run}
                        for c, t in self.tallies.items()},
            "comparisons": [c.to_json() for c in self.comparisons],
        }


@dataclass
class Summary:
    scale: str
    device: str
    top_k: int
    models: list[str]
    rows: list[ModeResult]
    online: list[OnlineResult]
    out_dir: Path
    vllm_version: str | None = None

    def row(self, model: str, mode: str) -> ModeResult:
        return next(r for r in self.rows if r.model == model and r.mode == mode)

    @property
    def vosti_mismatches(self) -> int:
        return (sum(r.mismatches for r in self.rows if r.mode.startswith("vosti"))
                + sum(o.compared - o.matches for o in self.online if o.mode.startswith("vosti")))

    def failures(self) -> list[str]:
        out = []
        for r in self.rows:
            if r.status not in ("ok", "unavailable"):
                out.append(f"{r.model}/{r.mode}: {r.status}: {(r.reason or '').splitlines()[0] if r.reason else ''}")
            elif r.status == "ok" and not (r.sanity or {}).get("passed"):
                out.append(f"{r.model}/{r.mode}: logits do not depend on the context (re-draw missed weights?)")
            elif r.mode.startswith("vosti") and r.mismatches:
                out.append(f"{r.model}/{r.mode}: {r.mismatches} bitwise mismatch(es)")
            elif r.mode.startswith("vosti") and r.status == "ok" and not r.compared:
                out.append(f"{r.model}/{r.mode}: nothing compared")
        for o in self.online:
            if o.status != "ok":
                out.append(f"online/{o.mode}: {o.status}: {o.reason}")
            elif o.mode.startswith("vosti") and o.matches != o.compared:
                out.append(f"online/vosti: {o.compared - o.matches} mismatch(es)")
        return out

    @property
    def ok(self) -> bool:
        """vosti ran, compared something and matched everywhere; no mode failed outright; every mode
        that ran saw logits that depend on the context (else a match proves nothing)."""
        vosti = [r for r in self.rows if r.mode.startswith("vosti")]
        return (all(r.status in ("ok", "unavailable") for r in self.rows)
                and all((r.sanity or {}).get("passed") for r in self.rows if r.status == "ok")
                and all(r.compared > 0 for r in vosti if r.status != "unavailable")
                and self.vosti_mismatches == 0
                and all(o.status == "ok" for o in self.online))


def _worker_command(mode: str, model: str, scale: str, classes: list[str], out: Path, eager: bool) -> list[str]:
    return [sys.executable, "-m", "vosti_plugin.integration.harness.worker", "--mode", mode, "--model", model,
            "--scale", scale, "--classes", ",".join(classes), "--out", str(out)] + (["--eager"] if eager else [])


def _run_worker(cmd: list[str], log_path: Path, timeout_s: float, on_progress,
                gpu: int | None = None, gpu_mem_share: float | None = None) -> tuple[int | None, bool]:
    """Run one worker; its progress lines feed `on_progress`, everything else goes to the log."""
    import threading

    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if gpu_mem_share is not None:
        # vLLM's memory profiling reads device-wide free memory, which neighbours change while it runs;
        # a fixed KV size skips it, and the utilization is then only the free-memory check at startup
        env.setdefault("VOSTI_HARNESS_GPU_MEM", f"{min(gpu_mem_share, 0.1):.3f}")
        env.setdefault("VOSTI_HARNESS_KV_GIB", DEFAULT_KV_GIB)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=REPO_ROOT,
                                start_new_session=True)

        def pump() -> None:
            for line in proc.stdout:
                if line.startswith(PROGRESS_PREFIX):
                    on_progress(json.loads(line[len(PROGRESS_PREFIX):]))
                else:
                    log.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=timeout_s)
            reader.join(timeout=10)
            return rc, False
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            reader.join(timeout=10)
            return None, True


def _collect(mode: engine.Mode, model: str, evidence: Path, rc: int | None, timed_out: bool,
             log_path: Path) -> ModeResult:
    row = ModeResult(mode.name, mode.label, model, "error")
    if not evidence.exists():
        row.reason = f"worker wrote no evidence (rc={rc}, timed out={timed_out}; log {log_path})"
        return row
    data = json.loads(evidence.read_text())
    row.status = data["status"]
    row.reason = data.get("reason")
    if timed_out:
        row.status, row.reason = "timeout", f"worker timed out; partial evidence kept (log {log_path})"
    elif data["status"] == "running":
        row.status, row.reason = "error", f"worker died (rc={rc}); partial evidence kept (log {log_path})"
    row.comparisons = [compare_pair(p) for p in data.get("pairs", [])]
    row.tallies = tally(row.comparisons)
    for key in ("sanity", "engine", "redraw", "vllm_version"):
        setattr(row, key, data.get(key))
    row.startup_s = data.get("startup_s", 0.0)
    row.timings_s = data.get("timings_s", {})
    return row


class _Bars:
    """A rich progress bar when rich is installed, plain lines otherwise (the GPU image may lack it)."""

    def __init__(self, console) -> None:
        self._lock = __import__("threading").Lock()
        try:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console)
        except ImportError:
            self._progress = None
        self._last: dict[int, str] = {}

    def __enter__(self):
        if self._progress:
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress:
            self._progress.__exit__(*exc)

    def add(self, description: str, total: int | None) -> int:
        with self._lock:
            if self._progress:
                return self._progress.add_task(description, total=total)
            tid = len(self._last)
            self._last[tid] = ""
            print(f"[harness] {description}: started", flush=True)
            return tid

    def update(self, tid: int, completed: int, description: str, total: int | None = None) -> None:
        with self._lock:
            if self._progress:
                kw = {"total": total} if total is not None else {}
                self._progress.update(tid, completed=completed, description=description, **kw)
            elif self._last.get(tid) != description:
                self._last[tid] = description
                print(f"[harness] {description}: {completed}", flush=True)


def _load_rows(models: list[str], modes: list[str], out_dir: Path,
               outcomes: dict | None = None) -> list[ModeResult]:
    rows = []
    outcomes = outcomes or {}
    for model in models:
        for mode_name in modes:
            mode = engine.get_mode(mode_name)
            path = out_dir / "raw" / f"{model}-{mode.name}.json"
            if path.exists():
                rc, timed_out = outcomes.get((model, mode.name), (0, False))
                rows.append(_collect(mode, model, path, rc, timed_out, out_dir / "logs" / f"{model}-{mode.name}.log"))
            else:
                rows.append(ModeResult(mode.name, mode.label, model, "missing", f"no evidence file {path}"))
    return rows


def _reusable(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("status") in ("ok", "unavailable")
    except (OSError, ValueError):
        return False


def compare(scale: str, modes: list[str], models: list[str], out_dir: Path, online: bool,
            *, classes: list[str] | None = None, worker_timeout_s: float | None = None,
            command: str | None = None, console=None, gpus: int = 1, resume: bool = False,
            report_only: bool = False, eager: bool = False, per_gpu: int = 1) -> Summary:
    """Run the harness; returns the Summary and writes results.md, summary.json, results.json, match_rate.png,
    raw/<model>-<mode>.json (each worker's evidence) and logs/ (worker and server logs) under out_dir.

    gpus > 1 runs that many workers at once, one GPU each (CUDA_VISIBLE_DEVICES); per_gpu > 1 shares
    each GPU among that many workers, each with a fixed KV cache ($VOSTI_HARNESS_KV_GIB, 5 GiB). resume keeps
    evidence files that finished (status ok/unavailable); report_only runs nothing and re-aggregates
    the evidence already under out_dir/raw (e.g. collected from several machines or calls)."""
    from concurrent.futures import ThreadPoolExecutor

    from vosti_plugin.integration.engine_presets import has_gpu

    sc = get_scale(scale)
    classes = list(classes or CLASS_ORDER)
    out_dir = Path(out_dir)
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    timeout = worker_timeout_s or (900.0 if sc.name == "cpu" else 1800.0)
    command = command or "python -m vosti_plugin.integration.harness " + shlex.join(
        [f"--scale={scale}", f"--modes={','.join(modes)}", f"--models={','.join(models)}", f"--out={out_dir}"]
        + (["--online"] if online else []))
    for model in models:
        model_specs.get(model)
    jobs = [(model, engine.get_mode(m)) for model in models for m in modes]
    online_results: list[OnlineResult] = []
    outcomes: dict[tuple[str, str], tuple[int | None, bool]] = {}
    with _Bars(console) as bars:
        def run_job(job, gpu):
            model, mode = job
            evidence = out_dir / "raw" / f"{model}-{mode.name}.json"
            if report_only or (resume and _reusable(evidence)):
                return
            evidence.unlink(missing_ok=True)
            total = sum(sc.planned[c] for c in classes)
            name = f"{model} / {mode.label}" + (f" (GPU {gpu})" if gpu is not None else "")
            task = bars.add(name, total)
            done: dict[str, int] = {}

            def on_progress(ev):
                done[ev["class"]] = ev["done"]
                bars.update(task, sum(done.values()), f"{name} [{ev['class']}]")

            log_path = out_dir / "logs" / f"{model}-{mode.name}.log"
            rc, timed_out = _run_worker(_worker_command(mode.name, model, scale, classes, evidence, eager),
                                        log_path, timeout, on_progress, gpu,
                                        0.9 / per_gpu if per_gpu > 1 else None)
            outcomes[(model, mode.name)] = (rc, timed_out)
            status = "timeout" if timed_out else ("finished" if rc == 0 else f"exit {rc}")
            bars.update(task, sum(done.values()), f"{name} [{status}]")

        if gpus * per_gpu > 1:
            from vosti_plugin.integration.harness.gpu_share import GpuShare, gpu_memory_bytes, worker_bytes

            share = GpuShare(gpus, per_gpu, gpu_memory_bytes(gpus) if per_gpu > 1 else None)
            kv_gib = float(os.environ.get("VOSTI_HARNESS_KV_GIB", DEFAULT_KV_GIB))

            def pinned(job):
                with share.take(worker_bytes(model_specs.get(job[0]).config, kv_gib)) as gpu:
                    run_job(job, gpu)

            with ThreadPoolExecutor(max_workers=gpus * per_gpu) as pool:
                list(pool.map(pinned, jobs))
        else:
            for job in jobs:
                run_job(job, None)
        if online and not report_only:
            from vosti_plugin.integration.tiny_model import ensure_tiny_model

            for mode_name in modes:
                if mode_name not in ("vosti", "default"):
                    continue
                task = bars.add(f"online / {engine.get_mode(mode_name).label}", 1)
                res = run_online(str(ensure_tiny_model()), mode_name, out_dir / "logs" / f"online-{mode_name}.log")
                (out_dir / "raw" / f"online-{mode_name}.json").write_text(json.dumps(res.__dict__, indent=1))
                bars.update(task, 1, f"online / {engine.get_mode(mode_name).label} [{res.status}]")
                online_results.append(res)
    rows = _load_rows(models, modes, out_dir, outcomes)
    if not online_results:            # not run now: keep what an earlier run of this out_dir measured
        for mode_name in modes:
            path = out_dir / "raw" / f"online-{mode_name}.json"
            if path.exists():
                online_results.append(OnlineResult(**json.loads(path.read_text())))
    if report_only or resume:
        previous = out_dir / "results.json"
        if not previous.exists():
            previous = out_dir / "summary.json"
        if previous.exists():
            first = json.loads(previous.read_text()).get("command", "").split("; then: ")[0]
            if first:
                command = f"{first}; then: {command}"
    versions = [r.vllm_version for r in rows if r.vllm_version]
    summary = Summary(scale=sc.name, device="GPU" if has_gpu() else "CPU", top_k=sc.top_k, models=list(models),
                      rows=rows, online=online_results, out_dir=out_dir,
                      vllm_version=versions[0] if versions else None)
    (out_dir / "results.md").write_text(report.markdown(summary, command))
    report.write_json(summary, command, out_dir / "results.json")
    report.plot(summary, out_dir / "match_rate.png")
    return summary
