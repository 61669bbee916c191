"""The HBM floor of the throughput bench: weights once per step plus the K/V each sequence's layers read."""
from vosti_plugin.integration.bench.throughput import decode_floor_tok_s, kv_bytes_per_token, kv_bytes_read, weight_bytes
from vosti_plugin.integration.harness.models import get, materialize


def _config(name: str) -> dict:
    import json

    cfg = json.loads((materialize(get(name)) / "config.json").read_text())
    return cfg.get("text_config", cfg)


def test_full_attention_model_reads_every_cached_token_in_every_layer():
    cfg = _config("llama31-8b")
    assert kv_bytes_read(cfg, 16384) == 16384 * kv_bytes_per_token(cfg) == 16384 * 131072


def test_sliding_window_layers_read_only_their_window():
    cfg = _config("gemma3-4b")
    per_layer = kv_bytes_per_token(cfg) // 34   # 2 x 4 KV heads x 256 x 2 bytes
    assert per_layer == 4096
    # 29 sliding layers (window 1024) and 5 full layers at 16K context
    assert kv_bytes_read(cfg, 16384) == per_layer * (29 * 1024 + 5 * 16384)
    assert kv_bytes_read(cfg, 512) == per_layer * 34 * 512   # inside the window every layer reads it all
    floor = decode_floor_tok_s(cfg, 16, 16384)
    assert floor == 16 * 4.3e12 / (weight_bytes(cfg) + 16 * kv_bytes_read(cfg, 16384))
    every_layer_full = 16 * 4.3e12 / (weight_bytes(cfg) + 16 * 16384 * kv_bytes_per_token(cfg))
    assert floor > 1.5 * every_layer_full


def test_bench_model_resolution_registry_tiny_and_directory(tmp_path):
    import json

    import pytest

    from vosti_plugin.integration.bench.throughput import resolve_model

    path, geometry, load = resolve_model("gemma3-4b")
    assert load == "dummy" and geometry["sliding_window"] == 1024 and (path / "config.json").is_file()
    _, tiny, load = resolve_model("tiny")
    assert load == "auto" and tiny["hidden_size"] == 128
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 7}, "model_type": "x"}))
    assert resolve_model(str(tmp_path)) == (tmp_path, {"vocab_size": 7}, "auto")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="without a config.json"):
        resolve_model(str(empty))


def test_a_cell_reports_median_times_so_one_slow_sample_does_not_set_it():
    from vosti_plugin.integration.bench.throughput import cell_row

    samples = [(3.0, 1.0, "cached", 960), (1.0, 1.2, "cached", 992), (1.1, 0.9, "cached", 1000)]
    row = cell_row(4, 1024, samples, 128, 1036.0)
    assert row["prefill_s"] == 1.1 and row["decode_s"] == 1.0
    assert row["prefill_tok_s"] == 4 * 1024 / 1.1 and row["decode_tok_s"] == 4 * 128 / 1.0
    assert row["prefill_s_samples"] == [3.0, 1.0, 1.1] and row["min_cached_tokens"] == 960
    assert row["decode_method"] == "cached" and row["repeats"] == 3
    mixed = cell_row(1, 0, [(0.1, 0.2, "cached", 0), (0.1, 0.3, "subtracted", 0)], 16, 1.0)
    assert mixed["decode_method"] == "cached+subtracted" and mixed["decode_s"] == 0.25


def test_the_largest_batch_decodes_in_one_step():
    from vosti_plugin.integration.bench.throughput import max_num_seqs

    assert max_num_seqs([1, 4, 16]) == 64        # earlier runs' engine, unchanged
    assert max_num_seqs([64, 128, 256]) == 256   # not waves of 64 (h200-s28's batched bench ran as such)
