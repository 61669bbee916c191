"""The installed vLLM is checked once against the supported releases, with an error that names both."""
from __future__ import annotations

import pytest

from vosti_plugin.vllm import compat


@pytest.mark.parametrize("version, supported", [
    ("0.26.0", True), ("0.26.3", True), ("0.32.0+cpu", True), ("0.32.1", True),
    ("0.25.9", False), ("0.30.0", False), ("0.33.0rc1", False), ("1.0.0", False), ("dev", False),
])
def test_supported_series(version, supported):
    message = compat.unsupported_message(version)
    assert (message is None) == supported
    if not supported:
        assert f"installed vLLM {version}" in message
        assert "0.26.x on CUDA" in message and "0.32.x on CPU" in message


@pytest.fixture
def installed_version(monkeypatch):
    def pretend(version: str) -> None:
        monkeypatch.setattr(compat, "vllm_version", lambda: version)
        compat.require_supported_vllm.cache_clear()

    yield pretend
    compat.require_supported_vllm.cache_clear()


def test_unsupported_version_raises_once_checked(installed_version):
    installed_version("0.30.0")
    with pytest.raises(compat.UnsupportedVLLM, match=r"installed vLLM 0\.30\.0; supported: 0\.26\.x on CUDA"):
        compat.require_supported_vllm()
    installed_version("0.32.0")
    assert compat.require_supported_vllm() == "0.32.0"


def test_the_installed_vllm_is_supported():
    pytest.importorskip("vllm")
    compat.require_supported_vllm.cache_clear()
    assert compat.unsupported_message(compat.require_supported_vllm()) is None


def test_selecting_vosti_on_an_unsupported_vllm_fails_with_the_versions(installed_version, tiny_model_path):
    pytest.importorskip("vllm")
    from vllm.engine.arg_utils import EngineArgs

    import vosti_plugin

    vosti_plugin.register()
    installed_version("0.29.0")
    args = EngineArgs(model=tiny_model_path, attention_backend="vosti", dtype="float32", max_model_len=256)
    with pytest.raises(compat.UnsupportedVLLM, match=r"installed vLLM 0\.29\.0"):
        args.create_engine_config()
