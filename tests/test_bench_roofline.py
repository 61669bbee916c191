"""vosti_plugin.integration.bench.roofline: percentages of HBM bandwidth from the kernel JSONs."""
from vosti_plugin.integration.bench.roofline import attention_rows, gemm_rows


def test_gemm_row_reports_weight_bytes_over_time_against_hbm():
    dense = {"sections": {"bench": [
        {"gemm": "o", "N": 4096, "K": 4096, "M": 4, "vosti_us": 15.6, "cublas_us": 7.8, "floor_us": 7.8,
         "config": {"split_k": 8}},
        {"gemm": "o", "N": 4096, "K": 4096, "M": 4096, "vosti_us": 900.0, "cublas_us": 260.0, "floor_us": 7.8,
         "config": {"split_k": 8}},   # prefill-sized: not a decode row
    ]}}
    rows = gemm_rows(dense)[2:]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    # 4096*4096*2 bytes = 33.6 MB; in 15.6 us that is 2.15 TB/s = 50 % of 4.3 TB/s; cuBLAS 100 %
    assert cells[3] == "33.6" and cells[7] == "50 %" and cells[8] == "100 %"


def test_attention_rows_pair_todays_config_with_the_one_shipped_before():
    now = "m64 n64 s512 w4 st2"   # what the catalog ships for Llama-3.1-8B bf16, page 64
    m = lambda config, ms, pct: {"geometry": "llama-3.1-8b", "case": "decode b4 8K", "config": config,
                                 "path": "split", "ms": ms, "kv_GBps": 1.0, "pct_hbm": pct}
    sweep = {"shipped": {"llama-3.1-8b": {"config": "m32 n64 s512 w4 st2"}},
             "measurements": [m(now, 0.05, 60.0), m("m32 n64 s512 w4 st2", 0.07, 40.0),
                              m("m16 n128 s256 w4 st2", 0.01, 99.0)]}
    rows = attention_rows(sweep, {"llama-3.1-8b": "m32 n64 s512 w4 st2"})[2:]
    assert len(rows) == 1 and now in rows[0] and "0.0500" in rows[0] and "0.0700" in rows[0] and "99" not in rows[0]
