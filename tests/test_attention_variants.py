"""The attention variants the H200 timing script runs: the deployment VOSTI_PREFILL_FUSED_FROM makes (FOLD as the
split path's combine; prefill fused in config.prefill_config's taller tiles) gives the shipped kernel's bits on chunked
prefill (split and fused path) and decode, through the script's own CPU smoke (Triton interpreter, fp32), and so do
window layers whose middle tiles skip the selects and a FOLD whose programs fold a KV head's query heads together
(the shipped FOLD folds one query head a program). A variant that drops the masks differs, so the comparison can
fail."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOTH_PATHS = ["FOLD combine", "fused prefill, FOLD combine", "window layers: middle tiles unmasked",
              "FOLD combine, a program per KV head"]
WRONG = "upper bound: no mask selects"


@pytest.mark.slow
def test_both_paths_variants_keep_the_shipped_bits(tmp_path):
    out = tmp_path / "av.json"
    proc = subprocess.run([sys.executable, "integration/gpu/attention_variants.py", "--cpu-smoke", "--out", str(out),
                           "--variants", ";".join(BOTH_PATHS + [WRONG])],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    cases = json.loads(out.read_text())["cases"]
    assert any("fused path" in c for c in cases) and any(c.startswith("decode") for c in cases)
    assert any(c.startswith("prefill") and "window" in c for c in cases)
    for case, row in cases.items():
        for name in BOTH_PATHS:
            assert row[name]["bits_equal_shipped"], (case, name)
        assert not row[WRONG]["bits_equal_shipped"], case


def test_every_variant_applies_to_the_shipped_kernel(tmp_path):
    """Each variant's source edits find their text in today's kernel (an edit whose text moved raises) and the
    edited module imports, so a lease never spends its time on a variant that cannot load."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("attention_variants", ROOT / "integration/gpu/attention_variants.py")
    av = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(av)
    for name, variant in av.VARIANTS.items():
        module = av.load_variant(name, variant[0], str(tmp_path))
        assert hasattr(module, "paged_attention"), name


def test_decode_cases_take_the_batches_asked_for(tmp_path):
    """--decode-batches / --decode-only pick the decode cases a lease times (batch 64 is where Gemma-3-4B's decode
    attention is furthest behind stock), each case's batch as many requests as its name says."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("attention_variants", ROOT / "integration/gpu/attention_variants.py")
    av = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(av)
    chosen = av.cases(False, "cpu", torch.float16, "llama31-8b", decode_batches=(2, 3), decode_only=True)
    assert chosen and all(name.startswith("decode b2 ") or name.startswith("decode b3 ") for name, *_ in chosen)
    for name, requests, *_ in chosen:
        assert len(requests) == int(name.split()[1][1:]), name
    assert any(name.startswith("prefill") for name, *_ in av.cases(False, "cpu", torch.float16, "llama31-8b",
                                                                    decode_batches=(1,)))


@pytest.mark.slow
def test_segments_in_one_tile_loop_fold_as_the_segment_loops_do(tmp_path, monkeypatch):
    """The fused prefill walking every key tile in one loop, folding at each segment's last tile, gives the bits of
    one loop a segment, with segments of 64 and 32 keys (a 256-key context: four and eight segments a row, window
    and global); with the segment loops' fold dropped (one partial for all segments) the bits differ."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("attention_variants", ROOT / "integration/gpu/attention_variants.py")
    av = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(av)
    flat = av._flat_segments()
    no_fold = [(flat[0][0], flat[0][1].replace("if ((tile + 1) % TILES_PER_SEGMENT == 0) or (tile + 1 == flat_end):",
                                               "if tile + 1 == flat_end:"))]
    assert no_fold != flat
    for segment in (64, 32):
        fields = {"prefill_fused": True, "segment": segment}
        av.VARIANTS.update({f"loops {segment}": ([], False, fields), f"flat {segment}": (flat, False, fields),
                            f"flat, no fold {segment}": (no_fold, False, fields)})
    names = [n for n in av.VARIANTS if n.startswith(("loops ", "flat"))]
    out = tmp_path / "av.json"
    monkeypatch.setattr(sys, "argv", ["attention_variants.py", "--cpu-smoke", "--prefill-only", "--out", str(out),
                                      "--variants", ";".join(names)])
    assert av.main() == 0
    cases = json.loads(out.read_text())["cases"]
    assert any("window" in c for c in cases) and any("fused path" in c for c in cases)
    for case, row in cases.items():
        for segment in (64, 32):
            assert row[f"flat {segment}"]["out_sha"] == row[f"loops {segment}"]["out_sha"], (case, segment)
            assert row[f"flat, no fold {segment}"]["out_sha"] != row[f"loops {segment}"]["out_sha"], (case, segment)
