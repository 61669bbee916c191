"""Issue 7: the launch check runs inside real vLLM startup; any failed obligation aborts it, naming the
obligation, before a request is served; an accepted launch writes the determinism certificate."""
import json
import sys
import textwrap

import pytest

from vosti_plugin.launch.obligations import LaunchRefused

pytestmark = pytest.mark.vllm


def _start(model, **overrides):
    from vosti_plugin.integration.engine_presets import build_llm

    return build_llm(str(model), skip_tokenizer_init=True, **overrides)


def _config_only_model(tmp_path, **geometry):
    from vosti_plugin.integration.tiny_model import GEOMETRY

    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(GEOMETRY, **geometry)))
    return d


def _refusal(model, **overrides) -> str:
    with pytest.raises(LaunchRefused) as info:
        _start(model, **overrides)
    return str(info.value)


def test_unsupported_head_size_aborts_startup(tmp_path):
    model = _config_only_model(tmp_path, hidden_size=192, num_attention_heads=4, head_dim=48)
    message = _refusal(model)
    assert "[attention-geometry]" in message and "head size 48" in message
    assert "this model's geometry is not supported yet: head size 48" in message


def test_page_size_not_multiple_of_tile_aborts_startup(tiny_model_path):
    import torch

    from vosti_plugin.attention.config import select_config

    page = 16
    tile = select_config(32, 4, 2, page, torch.float32).block_n
    assert page % tile != 0, "the fp32 catalog's KV tile must exceed 16 for this case"
    message = _refusal(tiny_model_path, block_size=page)
    assert "[page-size]" in message and "fix: pass --block-size 32" in message


def test_refused_feature_aborts_startup(tiny_model_path):
    message = _refusal(tiny_model_path, enable_lora=True, max_lora_rank=8)
    assert "[no-lora]" in message and "fix:" in message


def test_third_party_hookimpl_veto_aborts_startup(tiny_model_path, tmp_path, monkeypatch):
    """A deployment's own rule, discovered through the `vosti.launch_checks` entry-point group."""
    pkg = tmp_path / "site"
    pkg.mkdir()
    (pkg / "acme_rules.py").write_text(textwrap.dedent('''
        from vosti_plugin.launch.hookspecs import hookimpl
        from vosti_plugin.launch.obligations import Failure

        @hookimpl
        def vosti_check_launch(facts, failures):
            if facts.max_model_len > 512:
                return [Failure("acme-max-len", f"max_model_len {facts.max_model_len} > 512", "serve shorter")]
    '''))
    dist = pkg / "acme_rules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[vosti.launch_checks]\nacme = acme_rules\n")
    monkeypatch.syspath_prepend(str(pkg))
    message = _refusal(tiny_model_path, max_model_len=1024)
    assert "[acme-max-len]" in message
    sys.modules.pop("acme_rules", None)


def test_valid_launch_writes_certificate(tiny_model_path, tmp_path):
    import gc
    import time

    from vllm import SamplingParams

    cert_path = tmp_path / "cert.json"
    t0 = time.perf_counter()
    llm = _start(tiny_model_path, additional_config={"vosti": {"certificate": str(cert_path)}})
    startup = time.perf_counter() - t0
    try:
        cert = json.loads(cert_path.read_text())
        assert cert["kind"] == "vosti-determinism-certificate"
        assert cert["model"]["head_size"] == 32 and cert["model"]["num_kv_heads"] == 2
        assert cert["weights_fingerprint"] and len(cert["weights_fingerprint"]) == 64
        assert "paged_attention" in cert["kernel_configs"]
        assert cert["versions"]["vllm"] and cert["versions"]["triton"]
        assert any("Triton compiler" in t for t in cert["trusted_base"])
        print(f"startup {startup:.1f}s, launch check {cert['check_seconds']:.3f}s")
        out = llm.generate([{"prompt_token_ids": [5, 6, 7]}], SamplingParams(max_tokens=1), use_tqdm=False)
        assert len(out[0].outputs[0].token_ids) == 1
    finally:
        del llm
        gc.collect()


def test_offline_verify_model_runs_the_same_check(tiny_model_path):
    from typer.testing import CliRunner

    from vosti_plugin.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["verify", "--model", tiny_model_path, "--dtype", "float32", "--block-size", "32"])
    assert ok.exit_code == 0, ok.output
    assert "kernel-configs-verified" in ok.output and "FAILED" not in ok.output
    bad = runner.invoke(app, ["verify", "--model", tiny_model_path, "--dtype", "float32", "--block-size", "16"])
    assert bad.exit_code == 1
    assert "page-size" in bad.output and "FAILED" in bad.output and "fix: pass --block-size 32" in bad.output
    assert bad.output.strip().splitlines()[-1].startswith("summary: ")
