"""`vosti verify --model DIR --platform cuda`: a GPU deployment's launch check, run on a CPU-only machine,
with the same obligations and messages as the real launch."""
import pytest

pytestmark = pytest.mark.vllm


def test_bf16_launch_is_accepted_for_cuda_and_refused_for_cpu(tiny_model_path):
    from vosti_plugin.launch.offline import check_model

    facts, statuses = check_model(tiny_model_path, ["--dtype", "bfloat16", "--skip-tokenizer-init"],
                                  platform="cuda")
    assert facts.platform == "cuda" and facts.dtype == "bfloat16"
    assert all(s.ok for s in statuses), [(s.name, s.reason) for s in statuses if not s.ok]
    facts, statuses = check_model(tiny_model_path, ["--dtype", "bfloat16", "--skip-tokenizer-init"])
    assert facts.platform == "cpu"
    causes = [s.name for s in statuses if s.cause]
    assert causes == ["dtype"]


def test_cli_rejects_an_unknown_platform(tiny_model_path):
    from typer.testing import CliRunner

    from vosti_plugin.cli import app

    result = CliRunner().invoke(app, ["verify", "--model", tiny_model_path, "--platform", "tpu"])
    assert result.exit_code == 2 and "known platforms are cpu and cuda" in result.output
