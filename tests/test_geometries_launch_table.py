"""The geometry table's --launch mode without an engine: vLLM args forwarded as LLM kwargs, the capped
configs, refusal causes, and the README/summary of launch rows (rebuilt from summary.json)."""
import json
import subprocess

from vosti_plugin.integration.geometries import GEOMETRIES, launches, table
from vosti_plugin.vllm.launch_facts import cli_engine_kwargs
from vosti_plugin.launch.obligations import Failure, LaunchRefused


def test_vllm_args_after_the_separator_become_llm_kwargs():
    args = ["--dtype", "float32", "--max-num-batched-tokens", "512", "--language-model-only", "--enforce-eager"]
    assert cli_engine_kwargs(args) == {"dtype": "float32", "max_num_batched_tokens": 512,
                                             "language_model_only": True, "enforce_eager": True}
    assert cli_engine_kwargs([]) == {}


def test_launch_kwargs_select_vosti_on_dummy_weights_and_let_the_args_win(tmp_path):
    settings = launches.LaunchSettings(layers=2, max_model_len=2048, gpu_share=0.2)
    kw = launches.launch_kwargs(tmp_path, ["--max-model-len", "512", "--language-model-only"], settings)
    assert kw == {"model": str(tmp_path), "attention_backend": "vosti", "load_format": "dummy",
                  "skip_tokenizer_init": True, "max_model_len": 512, "gpu_memory_utilization": 0.2,
                  "language_model_only": True}
    fixed_kv = launches.launch_kwargs(tmp_path, [], launches.LaunchSettings(kv_gib=2))
    assert fixed_kv["kv_cache_memory_bytes"] == 2 * 2**30 and fixed_kv["max_model_len"] == 2048


def test_capped_configs_keep_the_wrapper_and_every_layer_kind():
    gemma = launches.capped(GEOMETRIES["gemma3-4b"], 2)
    assert gemma["vision_config"] == GEOMETRIES["gemma3-4b"]["vision_config"]
    assert gemma["text_config"]["num_hidden_layers"] == 2
    assert gemma["text_config"]["layer_types"] == ["sliding_attention", "full_attention"]
    assert launches.capped(GEOMETRIES["gemma3-1b"], 1)["layer_types"] == ["sliding_attention"]
    assert launches.capped(GEOMETRIES["llama31-70b-layers"], 4)["num_hidden_layers"] == 2
    assert launches.capped(GEOMETRIES["qwen25-7b"], 2)["num_hidden_layers"] == 2
    assert GEOMETRIES["qwen25-7b"]["num_hidden_layers"] == 28          # the catalog is left as it was


def test_vosti_refusals_keep_their_lines_and_other_errors_read_as_launch_failed():
    refused = LaunchRefused([Failure("text-only-inputs", "takes images", "pass --language-model-only")])
    causes = launches.launch_failure_causes(refused)
    assert causes[0].startswith("LaunchRefused: vosti refused this launch: 1 cause")
    assert causes[1] == "[text-only-inputs] takes images -> fix: pass --language-model-only"
    try:
        try:
            raise refused
        except LaunchRefused as inner:
            raise RuntimeError("engine core failed") from inner
    except RuntimeError as wrapped:
        assert launches.launch_failure_causes(wrapped) == causes
    assert launches.launch_failure_causes(ValueError("no room\nfor the KV cache\nat all")) == [
        "launch failed: ValueError: no room; for the KV cache"]


def test_a_launch_process_past_its_timeout_is_a_failed_row(monkeypatch):
    def run(cmd, **kw):
        assert "--launch-row" in cmd and cmd[-2:] == ["--", "--enforce-eager"]
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(launches.subprocess, "run", run)
    row = launches._launch_in_fresh_process("qwen3-4b", ["--enforce-eager"], launches.LaunchSettings(timeout_s=7))
    assert row["accepted"] is False and row["causes"] == ["launch failed: no row within 7 s (timeout)"]


def test_launches_run_side_by_side_and_report_their_rows_in_job_order(monkeypatch):
    import threading

    second_reported = threading.Event()

    def launch(name, args, settings):
        if name == "a":                   # the first job finishes once the second one is reported
            assert second_reported.wait(10)
        return {"model": name, "args": " ".join(args), "accepted": True}

    def on_rows(done):
        seen.append([r["model"] for r in done])
        second_reported.set()

    monkeypatch.setattr(launches, "_launch_in_fresh_process", launch)
    seen = []
    rows = launches.launch_all([("a", []), ("b", ["--x"])], launches.LaunchSettings(), parallel=2, on_rows=on_rows)
    assert [r["model"] for r in rows] == ["a", "b"]
    assert seen == [["b"], ["a", "b"]]


ROWS = [
    {"model": "qwen3-4b", "args": "", "accepted": True, "launch_s": 41.5, "check_s": 0.8, "generate_s": 0.3, "tokens": 4,
     "process_s": 55.0, "causes": []},
    {"model": "gemma3-4b", "args": "", "accepted": False, "launch_s": 3.1, "generate_s": None, "tokens": 0,
     "process_s": 9.0, "causes": ["LaunchRefused: vosti refused this launch: 1 cause", "[a|b] takes images"]},
]


def test_launch_rows_render_and_rebuild_from_the_summary(tmp_path):
    command, machine = "python -m vosti_plugin.integration.geometries.table --launch", "x86_64, NVIDIA H200"
    text = launches.launch_markdown(ROWS, command, machine, layers=2)
    assert "1 of 2 launches accepted" in text and "capped to 2 layers" in text
    assert "| model | vLLM args | accepted | launch s | check s | generate s | why not |" in text
    assert "| qwen3-4b | - | yes | 41.5 | 0.8 | 0.3 |  |" in text
    assert ("| gemma3-4b | - | no | 3.1 | - | - | LaunchRefused: vosti refused this launch: 1 cause; "
            "[a\\|b] takes images |") in text
    data = launches.launch_summary(ROWS, command, machine, layers=2)
    assert data["kind"] == "launch" and data["accepted"] == 1 and data["launches"] == 2
    (tmp_path / "summary.json").write_text(json.dumps(data))
    assert table.main(["--rebuild", str(tmp_path)]) == 0
    assert (tmp_path / "README.md").read_text() == text


def test_a_launch_run_stopped_midway_says_so_and_the_fixed_kv_cache(tmp_path):
    data = launches.launch_summary(ROWS[:1], "cmd", "gpu", layers=2, planned=21, kv_gib=2.0)
    assert data["planned"] == 21 and data["launches"] == 1
    text = launches.launch_markdown(ROWS[:1], "cmd", "gpu", 2, planned=21, kv_gib=2.0)
    assert "1 of 1 launches accepted (20 more planned, not finished: the run stopped first)" in text
    assert "KV cache fixed at 2 GiB per engine" in text
    (tmp_path / "summary.json").write_text(json.dumps(data))
    assert table.rebuild(tmp_path) == text
