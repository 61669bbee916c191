"""Gemma-3 4B/12B/27B ship as Gemma3ForConditionalGeneration. The offline launch check serves their text path
(or refuses the image inputs with the fix), and on the CPU set-up, where vLLM's gemma3_mm module cannot be
imported (no torchvision), it reads the text tower instead of dying in vLLM's model inspection."""
import dataclasses
import importlib.util
import json

import pytest

from vosti_plugin.integration.geometries import GEOMETRIES

ARGS = ["--load-format", "dummy", "--skip-tokenizer-init", "--max-model-len", "4096"]


def _model_dir(tmp_path, name, config):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def gemma3_4b(tmp_path_factory):
    return _model_dir(tmp_path_factory.mktemp("mm"), "gemma3-4b", GEOMETRIES["gemma3-4b"])


def test_multimodal_inputs_are_an_obligation_of_their_own():
    from tests.test_launch_obligations import GOOD
    from vosti_plugin.launch.check import run_check

    (failure,) = run_check(dataclasses.replace(GOOD, architecture="Gemma3ForConditionalGeneration",
                                               multimodal_inputs=True))
    assert failure.obligation == "text-only-inputs" and failure.fix_args == ("--language-model-only",)
    assert failure.fixed == {"multimodal_inputs": False}


@pytest.mark.vllm
def test_image_inputs_are_refused_with_the_language_model_only_fix(gemma3_4b):
    from vosti_plugin.launch.offline import check_model

    facts, statuses = check_model(gemma3_4b, ARGS, platform="cuda")
    assert facts.architecture == "Gemma3ForConditionalGeneration" and facts.multimodal_inputs
    causes = [s for s in statuses if s.cause]
    assert [s.name for s in causes] == ["text-only-inputs"], [(s.name, s.reason) for s in causes]
    assert causes[0].fix_args == ("--language-model-only",) and "encoder tower" in causes[0].reason
    if importlib.util.find_spec("torchvision") is None:
        assert "torchvision" in facts.extra["text_tower"] and "Gemma3ForCausalLM" in facts.extra["text_tower"]


@pytest.mark.vllm
def test_the_text_path_is_checked_like_the_text_model_it_is(gemma3_4b, tmp_path):
    from vosti_plugin.launch.offline import check_model

    facts, statuses = check_model(gemma3_4b, [*ARGS, "--language-model-only"], platform="cuda")
    assert all(s.ok for s in statuses), [(s.name, s.reason) for s in statuses if not s.ok]
    text = {**GEOMETRIES["gemma3-4b"]["text_config"], "architectures": ["Gemma3ForCausalLM"]}
    text_facts, text_statuses = check_model(_model_dir(tmp_path, "text", text), ARGS, platform="cuda")
    same = {"model", "architecture", "extra", "text_tower_loader"}   # what the shipped checkpoint is
    assert {k: v for k, v in dataclasses.asdict(facts).items() if k not in same} == \
        {k: v for k, v in dataclasses.asdict(text_facts).items() if k not in same}
    assert (facts.head_size, facts.num_q_heads, facts.num_kv_heads, facts.sliding_window, facts.vocab_size) == \
        (256, 8, 4, 1024, 262208)
    assert [s.name for s in statuses] == [s.name for s in text_statuses]
    assert facts.text_tower_loader and not text_facts.text_tower_loader and not facts.prefix_lm_attention


@pytest.mark.vllm
def test_cli_prints_the_refusal_and_exits_1_without_a_traceback(gemma3_4b):
    from typer.testing import CliRunner

    from vosti_plugin.cli import app

    result = CliRunner().invoke(app, ["verify", "--model", gemma3_4b, "--platform", "cuda", *ARGS])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "[text-only-inputs]" in result.output and "--language-model-only" in result.output
