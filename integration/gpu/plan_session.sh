#!/usr/bin/env bash
# An H200 session plan for #9: the STEPS below in order, everything under ${RES:-/root/res}, each step logged
# to plan.log. Run it detached so it outlives one device call, and collect with integration/gpu/collect.sh:
#   STEPS="tall harness-tall bench-llama" setsid nohup bash integration/gpu/plan_session.sh > /root/plan.out 2>&1 < /dev/null &
# Steps: tall (tall_gemm_check; decides V), harness-tall (GPU determinism harness with mode vosti-tall, Llama and
# Gemma sharing the GPU), bench-llama, agentic, bench-gemma, profile, dense-sweep, tall-sweep, attention-sweep
# (wgmma-sized tiles with smaller segments first: what long-context decode and window layers need),
# host-numerics (self-test cost), sampling (seeded bursts vs alone, #17), geometries (launch-check table, #18),
# geometries-launch (a real vLLM engine per geometry, 2 layers, 4 at once: accepted yes/no, launch and generate s, #18),
# harness-new (four new geometries, gpu-quick scale; HARNESS_MODELS picks others), bench-decode-gemma, bench-step-budget (#20: engine steps of 8192/16384 tokens), harness-base (Llama + Gemma, gpu-quick; HARNESS_MODES, e.g. vosti,vosti-fused-prefill,default), smoke-bench,
# harness-32k (harness-base at a 32K max_model_len), compiles-once (no vLLM: tests/test_compiles_once.py), attention-stride (split programs a
# SPLIT_SEGMENT_STRIDE apart: decode attention time and bits, no vLLM), harness-tall-quick (tall GEMM path, gpu-quick), bench-tall (vosti-tall vosti default bi at 1K/8K, batch 4),
# launch-guard (#19), sampler-cost and serve-sampling (#17), gemm-floor (#18), gemm-block-m (#18, no vLLM; GEMM_M: activation rows), gemm-paths (#20, no vLLM: decode vs mid vs tall tiles at 32-511 rows), profile-gap, profile-prefill, profile-worst, tall-variants, split-choice, prefill-seq, bench-tma,
# attention-variants (PREV_ATTENTION: an earlier paged_attention.py to time beside it; ATTN_VARIANTS: which),
# attention-variants-gemma (the same on Gemma-3-4B's window and global layers), attention-decode-batch (decode
# attention at batch 16/64 in 16-row tiles and with row sums by dot, no vLLM), attention-tile-height (decode in
# 16- and 32-row tiles on 1, 2 or 4 warps against the shipped bits; ATTN_VARIANTS: others), bench-attn, bench-long
# (Llama-3.1-8B at max_model_len 128K: vosti, vosti-nostretch, default), harness-step-grid and bench-step-grid
# (VOSTI_EAGER_STEP_GRID=1 under the four classes, and at 128K), startup and
# prefill-parts and bench-capture (#20: what an eager prefill step's host time costs), decode-parts (#20: a decode
# step by part as replayed graphs, no vLLM), attention-both-paths (#20: VOSTI_PREFILL_FUSED_FROM's FOLD combine
# and fused prefill tiles against the shipped kernel, no vLLM; ATTN_GEOMETRIES), harness-fused-prefill and bench-fused-prefill (the
# same deployment under the four classes, and timed against vosti and default; FUSED_PREFILL_BENCH_MODES, _CONTEXTS), attention-prefill (#20: the unmasked
# loop's schedule and the FMA ban's cost, no vLLM), decode-tiles-gpu (no vLLM), harness-decode16 and bench-decode16 (#20: decode-only steps in
# 16-row attention tiles, VOSTI_DECODE_TILE_ROWS=16, under the four classes and timed against vosti and default),
# harness-dot16 (the same tiles on the config's warps with row sums by dot, VOSTI_ATTENTION_ROW_SUMS=dot), harness-decode-modes
# (both of them and default in one harness run), harness-mid-gemm and bench-mid-gemm (#20: GEMMs of 64-255 rows in
# 64-row tiles, the default, under the four classes (MID_GEMM_MODELS) and timed at batch 64-256 against VOSTI_MID_GEMM=0 (MID_GEMM_BATCHES)),
# pdl-chain (no vLLM), pdl-gpu-test, bench-pdl (programmatic dependent launch: a decode step's layers, the GPU test,
# end to end against vosti without it and stock default; #18, #20),
# grid-summary (#20; the whole grid: STEPS="bench-llama bench-gemma agentic startup grid-summary"; GRID_CONTEXTS
# overrides the grid's contexts, e.g. 0,1024,8192,16384 to fit one lease; GRID_MODES its modes, e.g. "vosti default").
# V, the vosti mode benchmarked, is vosti-tall when the tall check found every row bit-equal, else vosti.
STEPS=${STEPS:-tall bench-llama agentic bench-gemma profile tall-sweep}
R=${RES:-/root/res}; mkdir -p "$R/tall"
export PYTHONUNBUFFERED=1
log() { echo "[$(date +%T)] $*" >> "$R/plan.log"; }
grid() {  # grid DIR MODEL "MODES" [BATCHES]
  env OUT="$R/$1" MODEL="$2" BENCH_MODES="$3" CONTEXTS=${GRID_CONTEXTS:-0,1024,4096,8192,16384} BATCHES=${4:-1,4,16} DECODE=128 \
    REPEATS=${REPEATS:-2} MODE_TIMEOUT=480 bash integration/gpu/session.sh bench > "$R/$1-${3// /_}.log" 2>&1
}
V=vosti
DECODE16_MODELS=${DECODE16_MODELS:-gemma3-4b}
log "start: $STEPS"
for step in $STEPS; do
  case $step in
    tall)
      timeout 200 python3 integration/gpu/tall_gemm_check.py --quick --no-sweep --budget-s 150 \
        --out "$R/tall/tall_gemm.json" > "$R/tall.log" 2>&1 && V=vosti-tall
      log "tall: $(grep 'TALL BITS' "$R/tall.log") -> $V" ;;
    harness-tall)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu --models llama31-8b,gemma3-4b --modes vosti-tall \
        --per-gpu 2 --worker-timeout 840 --out "$R/harness-tall" > "$R/harness-tall.log" 2>&1
      log "harness-tall rc=$?" ;;
    bench-llama)
      grid bench-llama llama31-8b "${GRID_MODES:-$V default bi}"
      if [ $V = vosti-tall ]; then grid bench-llama llama31-8b vosti 4; fi
      log "bench-llama done (${GRID_MODES:-$V default bi})" ;;
    agentic)
      env OUT="$R/agentic" BENCH_MODES="$V bi default" MODE_TIMEOUT=260 bash integration/gpu/session.sh agentic \
        > "$R/agentic.log" 2>&1; log "agentic done" ;;
    bench-gemma) grid bench-gemma gemma3-4b "${GRID_MODES:-$V default bi}"; log "bench-gemma done" ;;
    profile)   # PROFILE_MODELS, PROFILE_MODES, PROFILE_CONTEXT, PROFILE_BATCH pick the cell (e.g. Gemma-3-4B b64 @ 1K)
      for m in ${PROFILE_MODELS:-llama31-8b gemma3-4b}; do
        env OUT="$R/profile" MODEL=$m PROFILE_MODES="${PROFILE_MODES:-$V}" PROFILE_CONTEXT=${PROFILE_CONTEXT:-16384} \
          BATCHES=${PROFILE_BATCH:-16} MODE_TIMEOUT=200 bash integration/gpu/session.sh profile > "$R/profile-$m.log" 2>&1
      done; log "profile done" ;;
    dense-sweep)
      timeout 300 python3 integration/gpu/dense_bench.py --quick --budget-s 240 --out "$R/dense.json" \
        > "$R/dense.log" 2>&1; log "dense-sweep rc=$?" ;;
    tall-sweep)
      timeout 300 python3 integration/gpu/tall_gemm_check.py --quick --no-timing --budget-s 240 \
        --out "$R/tall/tall_sweep.json" > "$R/tall_sweep.log" 2>&1; log "tall-sweep rc=$?" ;;
    attention-sweep)
      timeout 300 python3 integration/gpu/attention_sweep.py --budget-s 230 --out "$R/attention_sweep.json" \
        --extra "m64 n128 s256 w4 st2,m64 n64 s256 w4 st2,m64 n128 s512 w4 st2,m64 n64 s128 w8 st2,m64 n128 s256 w8 st2" \
        > "$R/attention_sweep.log" 2>&1; log "attention-sweep rc=$?" ;;
    verify)   # prove the catalog once here (16 cores) so the engines below find the proofs cached
      timeout 500 python3 -m vosti_plugin.cli verify > "$R/verify.log" 2>&1; log "verify rc=$? $(tail -1 "$R/verify.log")" ;;
    host-numerics)
      timeout 240 python3 integration/gpu/host_numerics_cost.py --out "$R/host_numerics" > "$R/host_numerics.log" 2>&1
      log "host-numerics rc=$?" ;;
    sampling)
      timeout 560 python3 integration/gpu/sampling_burst.py --out "$R/sampling" --layers 8 --modes vosti,default \
        > "$R/sampling.log" 2>&1; log "sampling rc=$?" ;;
    geometries)
      timeout 400 python3 -m vosti_plugin.integration.geometries.table --out "$R/geometries" > "$R/geometries.log" 2>&1
      log "geometries rc=$?" ;;
    geometries-launch)   # GEOMETRY_MODELS=a,b: only these (e.g. gemma3-4b,gemma3-12b)
      timeout 560 python3 -m vosti_plugin.integration.geometries.table --launch ${GEOMETRY_MODELS:+--models $GEOMETRY_MODELS} \
        --out "$R/geometries-launch" > "$R/geometries-launch.log" 2>&1
      log "geometries-launch rc=$?" ;;
    harness-new)   # HARNESS_MODELS=a,b: other models (e.g. those whose GEMM configs a change moved)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti,default --per-gpu 4 \
        --models ${HARNESS_MODELS:-llama32-3b-l8,qwen25-7b-l8,phi3-mini-l8,llama32-1b-l8} --worker-timeout 840 \
        --out "$R/harness-new" > "$R/harness-new.log" 2>&1; log "harness-new rc=$?" ;;
    harness-base)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes ${HARNESS_MODES:-vosti,default} --per-gpu ${HARNESS_PER_GPU:-4} \
        --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-base" > "$R/harness-base.log" 2>&1
      log "harness-base rc=$?" ;;
    harness-32k)   # harness-base under a 32K max_model_len: graph decode steps' split programs take several segments each
      timeout 1200 python3 -m vosti_plugin.integration.harness --scale gpu-quick-32k --modes vosti,default --per-gpu ${HARNESS_PER_GPU:-4} \
        --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-32k" > "$R/harness-32k.log" 2>&1
      log "harness-32k rc=$?" ;;
    attention-stride)   # split programs a segment apart (SPLIT_SEGMENT_STRIDE) vs one program a segment and other strides:
      # bits and decode attention time at 1K and 32K under the 128K grid, Gemma then Llama heads, no vLLM (#20)
      for g in gemma3-4b llama31-8b; do
        timeout 400 python3 integration/gpu/attention_variants.py --geometry $g --decode-only \
          --decode-batches ${ATTN_DECODE_BATCHES:-1,16,64} --decode-contexts ${ATTN_DECODE_CONTEXTS:-1024,32768} \
          --variants "${ATTN_VARIANTS:-one program a segment;segment stride 16;segment stride 64}" \
          --out "$R/attention-stride-$g.json" > "$R/attention-stride-$g.log" 2>&1
      done; log "attention-stride done" ;;
    decode-tiles-gpu)   # every row of a 2048-row chunk decoded in 16-row tiles against its prefill row (#20; no vLLM, needs pytest)
      timeout 420 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu -s tests/test_attention_decode_tiles.py \
        tests/test_attention_row_sums.py > "$R/decode-tiles-gpu.log" 2>&1; log "decode-tiles-gpu rc=$? $(tail -1 "$R/decode-tiles-gpu.log")" ;;
    compiles-once)   # each attention launch config (steps of 1-33 sequences) and GEMM path (1-1024 rows) compiles once (no vLLM, needs pytest)
      timeout 300 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu -s -rs tests/test_compiles_once.py \
        > "$R/compiles-once.log" 2>&1; log "compiles-once rc=$? $(tail -1 "$R/compiles-once.log")" ;;
    harness-decode16)   # the four classes with decode-only steps in 16-row attention tiles, stock default as the control (#20)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-decode16,default --per-gpu 4 \
        --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-decode16" > "$R/harness-decode16.log" 2>&1
      log "harness-decode16 rc=$?" ;;
    harness-dot16)   # the four classes with row sums by dot and 16-row decode tiles on the config's warps (#20)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-dot16,default --per-gpu 4 \
        --models ${DOT16_MODELS:-llama31-8b,gemma3-4b} --worker-timeout 840 --out "$R/harness-dot16" > "$R/harness-dot16.log" 2>&1
      log "harness-dot16 rc=$?" ;;
    harness-decode-modes)   # both decode-tile modes under the four classes in one run, stock default as the one control (#20)
      timeout 1200 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-dot16,vosti-decode16,default \
        --per-gpu 4 --models llama31-8b,gemma3-4b --worker-timeout 1100 --out "$R/harness-decode-modes" \
        > "$R/harness-decode-modes.log" 2>&1; log "harness-decode-modes rc=$?" ;;
    bench-decode16)   # decode with 16-row tiles vs vosti's 64-row tiles vs stock default (#20); DECODE16_MODELS=gemma3-4b,llama31-8b,
      # DECODE16_BATCHES (e.g. 4,64: batch 64 is where Gemma-3-4B's decode attention is furthest behind), DECODE16_CONTEXTS
      for m in ${DECODE16_MODELS//,/ }; do
        env OUT="$R/bench-decode16-$m" MODEL=$m BENCH_MODES="${DECODE16_BENCH_MODES:-vosti-decode16 vosti-dot16 vosti default}" \
          CONTEXTS=${DECODE16_CONTEXTS:-1024,16384} BATCHES=${DECODE16_BATCHES:-1,4,16} DECODE=128 REPEATS=1 MODE_TIMEOUT=300 \
          bash integration/gpu/session.sh bench \
          > "$R/bench-decode16-$m.log" 2>&1
      done; log "bench-decode16 done" ;;
    harness-tall-quick)   # the tall GEMM path under the four classes, stock default as the control
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-tall,default --per-gpu 4 \
        --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-tall-quick" \
        > "$R/harness-tall-quick.log" 2>&1; log "harness-tall-quick rc=$?" ;;
    bench-tall)   # prefill/decode: tall path vs default path vs stock default vs BI, one process each
      env OUT="$R/bench-tall" MODEL=llama31-8b BENCH_MODES="vosti-tall vosti default bi" CONTEXTS=1024,8192 BATCHES=4 \
        DECODE=128 MODE_TIMEOUT=240 bash integration/gpu/session.sh bench > "$R/bench-tall.log" 2>&1
      log "bench-tall done" ;;
    launch-guard)   # the runtime launch guard's cost per decode step (#19)
      timeout 300 python3 integration/gpu/launch_guard_cost.py --out "$R/launch_guard" > "$R/launch_guard.log" 2>&1
      log "launch-guard rc=$?" ;;
    sampler-cost)   # sampler step, vosti vs stock, batch 1/16/64 (#17)
      timeout 300 python3 integration/gpu/sampler_step_cost.py --out "$R/sampler-cost" > "$R/sampler-cost.log" 2>&1
      log "sampler-cost rc=$?" ;;
    serve-sampling)   # vllm serve: 64+ concurrent seeded mixed requests, two bursts vs alone, vosti then stock (#17)
      timeout 590 python3 integration/gpu/serve_sampling_burst.py --out "$R/serve-sampling" \
        > "$R/serve-sampling.log" 2>&1; log "serve-sampling rc=$?" ;;
    profile-gap)   # one decode step by kernel family and wall vs GPU-busy time, vosti vs default (#20)
      env OUT="$R/profile-gap" MODEL=llama31-8b PROFILE_MODES="vosti default" PROFILE_CONTEXT=1024 BATCHES=4 \
        MODE_TIMEOUT=200 bash integration/gpu/session.sh profile > "$R/profile-gap.log" 2>&1
      log "profile-gap done" ;;
    profile-prefill)   # one prefill step by kernel family, wall vs GPU-busy time: pointer vs TMA tall path vs default
      env OUT="$R/profile-prefill" MODEL=llama31-8b PROFILE_MODES="vosti-pointer vosti default" PROFILE_PHASE=prefill \
        PROFILE_CONTEXT=1024 BATCHES=4 MODE_TIMEOUT=200 bash integration/gpu/session.sh profile \
        > "$R/profile-prefill.log" 2>&1; log "profile-prefill done" ;;
    profile-worst)   # the worst prefill cells (16K context, batch 4) by kernel family: vosti vs default (#20)
      for m in ${PROFILE_MODELS:-gemma3-4b llama31-8b}; do
        env OUT="$R/profile-worst" MODEL=$m PROFILE_MODES="vosti default" PROFILE_PHASE=prefill \
          PROFILE_CONTEXT=16384 BATCHES=4 MODE_TIMEOUT=200 bash integration/gpu/session.sh profile \
          > "$R/profile-worst-$m.log" 2>&1
      done; log "profile-worst done" ;;
    gemm-floor)   # decode GEMMs of the 19 served geometries vs the weight-read floor (#18)
      timeout 300 python3 integration/gpu/geometry_gemm_floor.py --out "$R/gemm-floor" > "$R/gemm-floor.log" 2>&1
      log "gemm-floor rc=$? $(tail -1 "$R/gemm-floor.log")" ;;
    gemm-paths)   # the shipped GEMM configs at 32-511 rows through the decode tiles, the mid tiles and the tall path vs cuBLAS, bits vs decode (#20: MID_MIN_ROWS, TALL_MIN_ROWS)
      timeout 330 python3 integration/gpu/decode_gemm_sweep.py --paths --out "$R/gemm-paths" --m ${GEMM_PATHS_M:-32,64,128,256,384,511} \
        --budget-s ${GEMM_BUDGET_S:-200} > "$R/gemm-paths.log" 2>&1; log "gemm-paths rc=$? $(tail -1 "$R/gemm-paths.log")" ;;
    gemm-block-m)   # decode GEMMs in 16-row activation tiles (mma.sync, a third CTA per SM) beside 64-row ones: bits vs the tall path, time (#18)
      timeout 330 python3 integration/gpu/decode_gemm_sweep.py --out "$R/gemm-block-m" --block-m 16,64 --m ${GEMM_M:-1,4,16} \
        --budget-s ${GEMM_BUDGET_S:-200} > "$R/gemm-block-m.log" 2>&1; log "gemm-block-m rc=$? $(tail -1 "$R/gemm-block-m.log")" ;;
    split-choice)   # each split decode GEMM's split count timed in decode and on the tall path, bits checked (#20, no vLLM);
      # SPLIT_SHAPES: N:K,... (default every served shape that splits), SPLIT_CONFIGS: splits or block_n:split
      timeout 400 python3 integration/gpu/split_choice.py --out "$R/split-choice" --shapes "${SPLIT_SHAPES:-split}" \
        --configs "${SPLIT_CONFIGS:-1,2,4,8}" > "$R/split-choice.log" 2>&1; log "split-choice rc=$?" ;;
    tall-variants)   # prefill GEMM kernel variants against the decode path's bits and cuBLAS (#20); TALL_M: rows,
      # TALL_VARIANTS: which (comma-separated names; default all)
      timeout 300 python3 integration/gpu/tall_variants.py --out "$R/tall-variants/summary.json" --budget-s 240 \
        --m ${TALL_M:-2048,16384} ${TALL_VARIANTS:+--variants "$TALL_VARIANTS"} \
        > "$R/tall-variants.log" 2>&1; log "tall-variants rc=$? $(tail -1 "$R/tall-variants.log")" ;;
    prefill-seq)   # a prefill forward's GEMMs back to back, host cost included: TMA, pointer, old module, cuBLAS
      timeout 200 python3 integration/gpu/prefill_gemm_sequence.py --out "$R/prefill-seq/summary.json" \
        ${OLD_MATMUL:+--old "$OLD_MATMUL"} > "$R/prefill-seq.log" 2>&1; log "prefill-seq rc=$?" ;;
    bench-tma)   # prefill/decode with the tall path's pointer kernels (vosti-pointer) and its TMA kernel (vosti)
      env OUT="$R/bench-tma" MODEL=llama31-8b BENCH_MODES="vosti-pointer vosti" CONTEXTS=1024,8192 BATCHES=4 \
        DECODE=128 MODE_TIMEOUT=240 bash integration/gpu/session.sh bench > "$R/bench-tma.log" 2>&1; log "bench-tma done" ;;
    attention-variants)   # paged-attention kernel variants: bits against the shipped kernel, chunked prefill and decode (#20)
      timeout 300 python3 integration/gpu/attention_variants.py ${PREV_ATTENTION:+--previous "$PREV_ATTENTION"} \
        ${ATTN_VARIANTS:+--variants "$ATTN_VARIANTS"} \
        --out "$R/attention-variants.json" > "$R/attention-variants.log" 2>&1; log "attention-variants rc=$?" ;;
    attention-tile-height)   # decode in 16-row tiles with the shipped bits? (#20) warps per row as in 64-row tiles, or row sums by dot (digests: 16 vs 64 rows); Gemma then Llama heads
      for g in gemma3-4b llama31-8b; do
        timeout 300 python3 integration/gpu/attention_variants.py --geometry $g --variants "${ATTN_VARIANTS:-tiles of 16 rows;tiles of 16 rows, 1 warp;tiles of 16 rows, 2 warps;tiles of 32 rows, 2 warps;row sums by dot (other bits);row sums by dot, tiles of 16 rows (other bits)}" \
          --out "$R/attention-tile-height-$g.json" > "$R/attention-tile-height-$g.log" 2>&1
      done; log "attention-tile-height done" ;;
    attention-decode-batch)   # decode attention at batch 16 and 64 (ATTN_DECODE_BATCHES): 16-row tiles and row sums by dot vs the shipped 64-row tiles, Gemma then Llama heads, no vLLM (#20)
      for g in gemma3-4b llama31-8b; do
        timeout 300 python3 integration/gpu/attention_variants.py --geometry $g --decode-only \
          --decode-batches ${ATTN_DECODE_BATCHES:-16,64} \
          --variants "${ATTN_VARIANTS:-tiles of 16 rows;row sums by dot (other bits);row sums by dot, tiles of 16 rows (other bits)}" \
          --out "$R/attention-decode-batch-$g.json" > "$R/attention-decode-batch-$g.log" 2>&1
      done; log "attention-decode-batch done" ;;
    attention-prefill)   # prefill attention: the unmasked loop's schedule (stages; warp specialization does not compile on Triton 3.6, results/cpu-sm90-static), what the FMA ban costs (#20)
      timeout 300 python3 integration/gpu/attention_variants.py --geometry llama31-8b --variants "${ATTN_VARIANTS:-whole loop 3 stages;whole loop 3 stages, 128 rows, 8 warps, fused;tiles of 128 rows, 8 warps;row sums by dot (other bits);row sums by dot, tiles of 128 rows, 8 warps, fused (other bits);fp fusion on (other bits)}" \
        --out "$R/attention-prefill.json" > "$R/attention-prefill.log" 2>&1; log "attention-prefill rc=$?" ;;
    attention-variants-gemma)   # Gemma-3-4B's window and global layers: decode latency variants, bits kept or not (#20)
      timeout 400 python3 integration/gpu/attention_variants.py --geometry gemma3-4b --variants "${ATTN_VARIANTS:-tile loop 3 stages;tile loop 4 stages;tiles of 16 rows;tiles of 16 rows, 3 stages;tiles of 32 rows;4 warps;combine w1, loop 2 stages;segments of 256 (other bits);segments of 128 (other bits);KV tiles of 128 (other bits)}" \
        --out "$R/attention-variants-gemma.json" > "$R/attention-variants-gemma.log" 2>&1; log "attention-variants-gemma rc=$?" ;;
    attention-both-paths)   # VOSTI_PREFILL_FUSED_FROM's launches (#20): decode split with a FOLD combine, prefill fused in taller tiles; Llama then Gemma heads
      for g in ${ATTN_GEOMETRIES:-llama31-8b gemma3-4b}; do
        timeout 300 python3 integration/gpu/attention_variants.py --geometry $g \
          --variants "FOLD combine;fused prefill, FOLD combine;combine w4" \
          --out "$R/attention-both-paths-$g.json" > "$R/attention-both-paths-$g.log" 2>&1
      done; log "attention-both-paths done" ;;
    harness-fused-prefill)   # every multi-token prefill step fused, the rest split with a FOLD combine, under the four classes (#20)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-fused-prefill,default \
        --per-gpu 4 --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-fused-prefill" \
        > "$R/harness-fused-prefill.log" 2>&1; log "harness-fused-prefill rc=$?" ;;
    bench-fused-prefill)   # prefill and decode: vosti (fused prefill from 512 tokens by default where the group is <= 8) vs every step split vs stock default, batch 4 (#20)
      for m in ${FUSED_PREFILL_MODELS:-llama31-8b}; do
        env OUT="$R/bench-fused-prefill-$m" MODEL=$m BENCH_MODES="${FUSED_PREFILL_BENCH_MODES:-vosti vosti-split-prefill default}" \
          CONTEXTS=${FUSED_PREFILL_CONTEXTS:-1024,8192,16384} BATCHES=4 DECODE=128 REPEATS=${REPEATS:-2} MODE_TIMEOUT=300 bash integration/gpu/session.sh bench \
          > "$R/bench-fused-prefill-$m.log" 2>&1
      done; log "bench-fused-prefill done" ;;
    harness-mid-gemm)   # GEMMs of 64-255 rows in 64-row tiles (the default; MID_GEMM_HARNESS_MODES) under the four classes, default as the control (#20)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes ${MID_GEMM_HARNESS_MODES:-vosti,default} \
        --per-gpu 4 --models ${MID_GEMM_MODELS:-llama31-8b,gemma3-4b,llama32-1b-l8} --worker-timeout 840 \
        --out "$R/harness-mid-gemm" > "$R/harness-mid-gemm.log" 2>&1; log "harness-mid-gemm rc=$?" ;;
    bench-mid-gemm)   # batched decode (64-256 rows a step: mid and tall tiles) and prefill: 64-row mid tiles (vosti) vs the decode tiles (VOSTI_MID_GEMM=0) vs stock default (#20)
      env OUT="$R/bench-mid-gemm" MODEL=llama31-8b BENCH_MODES="${MID_GEMM_BENCH_MODES:-vosti vosti-no-mid-gemm default}" \
        CONTEXTS=${MID_GEMM_CONTEXTS:-1024} BATCHES=${MID_GEMM_BATCHES:-64,128,256} DECODE=128 REPEATS=1 MODE_TIMEOUT=300 \
        bash integration/gpu/session.sh bench > "$R/bench-mid-gemm.log" 2>&1; log "bench-mid-gemm done" ;;
    pdl-chain)   # a decode step's layers without programmatic dependent launch (shipped), with it, with an early trigger; no vLLM (#18, #20)
      timeout 400 python3 integration/gpu/pdl_chain.py --models ${PDL_CHAIN_MODELS:-qwen3-0.6b,qwen25-0.5b,gemma3-1b,llama31-8b,gemma3-4b} \
        --batches 1,4,16 --out "$R/pdl-chain/pdl_chain.json" > "$R/pdl-chain.log" 2>&1; log "pdl-chain rc=$?" ;;
    pdl-gpu-test)   # the dependent-launch GPU test (bits with and without it, a CUDA graph of norm + GEMM layers)
      timeout 300 python3 -m pytest -q -o addopts= -m gpu -s tests/test_dependent_launch.py > "$R/pdl-gpu-test.log" 2>&1
      log "pdl-gpu-test rc=$? $(tail -1 "$R/pdl-gpu-test.log")" ;;
    bench-pdl)   # decode and prefill with programmatic dependent launch (vosti-pdl) vs without (vosti) vs stock default;
      # PDL_MODELS (llama31-8b qwen3-0.6b), PDL_BATCHES (1,4,16), PDL_CONTEXTS (1024) (#18, #20)
      for m in ${PDL_MODELS:-llama31-8b qwen3-0.6b}; do
        env OUT="$R/bench-pdl-$m" MODEL=$m BENCH_MODES="vosti-pdl vosti default" CONTEXTS=${PDL_CONTEXTS:-1024} \
          BATCHES=${PDL_BATCHES:-1,4,16} DECODE=128 REPEATS=1 MODE_TIMEOUT=300 bash integration/gpu/session.sh bench \
          > "$R/bench-pdl-$m.log" 2>&1
      done; log "bench-pdl done" ;;
    bench-attn)   # prefill/decode after an attention change: vosti vs stock default at 1K/8K/16K, batch 4 (#20)
      env OUT="$R/bench-attn" MODEL=llama31-8b BENCH_MODES="vosti default" CONTEXTS=1024,8192,16384 BATCHES=4 \
        DECODE=128 MODE_TIMEOUT=240 bash integration/gpu/session.sh bench > "$R/bench-attn.log" 2>&1; log "bench-attn done" ;;
    bench-long)   # the default max_model_len (128K): LONG_MODELS (llama31-8b), LONG_MODES (vosti, vosti before the
      # workspace stretch, default), LONG_BATCHES (1,4,16), LONG_REPEATS (2) (#20)
      for m in ${LONG_MODELS:-llama31-8b}; do
        env OUT="$R/bench-long-$m" MODEL=$m BENCH_MODES="${LONG_MODES:-vosti vosti-nostretch default}" CONTEXTS=1024,8192 \
          BATCHES=${LONG_BATCHES:-1,4,16} DECODE=128 REPEATS=${LONG_REPEATS:-2} BENCH_ARGS="--max-model-len 131072" \
          MODE_TIMEOUT=300 bash integration/gpu/session.sh bench > "$R/bench-long-$m.log" 2>&1
      done; log "bench-long done" ;;
    harness-step-grid)   # the four classes with eager steps' attention grid from the step (VOSTI_EAGER_STEP_GRID=1) (#20)
      timeout 900 python3 -m vosti_plugin.integration.harness --scale gpu-quick --modes vosti-step-grid,default --per-gpu 4 \
        --models llama31-8b,gemma3-4b --worker-timeout 840 --out "$R/harness-step-grid" > "$R/harness-step-grid.log" 2>&1
      log "harness-step-grid rc=$?" ;;
    bench-step-grid)   # prefill/decode at 128K max_model_len: every step's grid for max_model_len vs eager steps' from the step (the default) vs default (#20)
      env OUT="$R/bench-step-grid" MODEL=llama31-8b BENCH_MODES="${SG_MODES:-vosti-model-grid vosti default}" \
        CONTEXTS=1024,8192 BATCHES=${SG_BATCHES:-4,16} DECODE=128 REPEATS=${REPEATS:-2} \
        BENCH_ARGS="--max-model-len 131072" MODE_TIMEOUT=300 \
        bash integration/gpu/session.sh bench > "$R/bench-step-grid.log" 2>&1; log "bench-step-grid done" ;;
    startup)   # startup of vosti and stock default, cold (fresh Triton and vLLM compile caches) then warm (#20)
      mkdir -p "$R/startup"
      for m in ${STARTUP_MODES:-vosti default}; do
        d=$(mktemp -d)
        for kind in cold warm; do
          env TRITON_CACHE_DIR="$d/triton" VLLM_CACHE_ROOT="$d/vllm" timeout 400 python3 -m vosti_plugin.integration.bench.throughput \
            --mode $m --model llama31-8b --contexts 0 --batches 1 --decode-tokens 8 --repeats 1 \
            --out "$R/startup/tp_llama31-8b_${m}_$kind.json" > "$R/startup/$m-$kind.log" 2>&1
        done
      done; log "startup done" ;;
    grid-summary)   # the grid of bench-llama, bench-gemma, agentic and startup as integration/results/h200/summary.json
      (shopt -s nullglob   # a step that did not run (agentic, startup) leaves its inputs out
       python3 -m vosti_plugin.integration.bench.grid --throughput "$R"/bench-llama/tp_*.json "$R"/bench-gemma/tp_*.json \
        --agentic "$R"/agentic/ag_*.json --startup "$R"/startup/tp_*.json --vosti-mode $V --out "$R/grid" \
        > "$R/grid.log" 2>&1); log "grid-summary rc=$?" ;;
    prefill-parts)   # one prefill step by part, host and GPU time: GEMMs vs cuBLAS, attention split/fused (#20)
      mkdir -p "$R/prefill-parts"
      for m in gemma3-4b llama31-8b; do for c in 1024 8192; do
        timeout 120 python3 integration/gpu/prefill_layer_parts.py --model $m --context $c \
          --out "$R/prefill-parts/$m-$c.json" >> "$R/prefill-parts.log" 2>&1
      done; done; log "prefill-parts done" ;;
    decode-parts)   # a decode step by part, each part a replayed CUDA graph, no vLLM: where Gemma's decode gap goes (#20)
      mkdir -p "$R/decode-parts"
      for mbc in gemma3-4b:1:1024 gemma3-4b:4:1024 gemma3-4b:16:1024 gemma3-4b:4:16384 llama31-8b:4:1024 \
                 llama31-8b:4:16384 qwen3-8b:4:1024; do
        IFS=: read -r m b c <<< "$mbc"
        timeout 150 python3 integration/gpu/decode_layer_parts.py --model $m --batch $b --context $c \
          --out "$R/decode-parts/$m-b$b-$c.json" >> "$R/decode-parts.log" 2>&1
      done; log "decode-parts done" ;;
    bench-capture)   # prefill steps as piecewise CUDA graphs (capture size 2048) vs vosti's default and stock (#20)
      for m in gemma3-4b llama31-8b; do
        env OUT="$R/bench-capture/$m" MODEL=$m BENCH_MODES="vosti default" CONTEXTS=1024,8192 BATCHES=4 DECODE=64 \
          REPEATS=1 MODE_TIMEOUT=300 bash integration/gpu/session.sh bench > "$R/bench-capture-$m.log" 2>&1
        env OUT="$R/bench-capture/$m-cg2048" MODEL=$m BENCH_MODES=vosti CONTEXTS=1024,8192 BATCHES=4 DECODE=64 \
          REPEATS=1 MODE_TIMEOUT=400 BENCH_ARGS="--max-cudagraph-capture-size 2048" bash integration/gpu/session.sh bench \
          > "$R/bench-capture-$m-cg2048.log" 2>&1
      done; log "bench-capture done" ;;
    bench-decode-gemma)   # decode at contexts 0, 1K and 16K, batch 1/4/16: vosti vs stock default, Gemma-3-4B (#18, #20)
      env OUT="$R/bench-decode-gemma" MODEL=gemma3-4b BENCH_MODES="vosti default" CONTEXTS=0,1024,16384 BATCHES=1,4,16 \
        DECODE=128 REPEATS=1 MODE_TIMEOUT=300 bash integration/gpu/session.sh bench > "$R/bench-decode-gemma.log" 2>&1
      log "bench-decode-gemma done" ;;
    bench-step-budget)   # prefill/decode with engine steps of 2048 (vosti's default), 8192 and 16384 tokens (stock's), Llama-3.1-8B, batch 4 (#20)
      for b in ${STEP_BUDGETS:-8192 16384}; do
        env OUT="$R/bench-step-budget/$b" MODEL=llama31-8b BENCH_MODES="vosti" CONTEXTS=1024,8192,16384 BATCHES=4 \
          DECODE=64 REPEATS=2 BENCH_ARGS="--max-num-batched-tokens $b" MODE_TIMEOUT=300 \
          bash integration/gpu/session.sh bench > "$R/bench-step-budget-$b.log" 2>&1
      done
      env OUT="$R/bench-step-budget/2048" MODEL=llama31-8b BENCH_MODES="vosti default" CONTEXTS=1024,8192,16384 BATCHES=4 \
        DECODE=64 REPEATS=2 MODE_TIMEOUT=300 bash integration/gpu/session.sh bench > "$R/bench-step-budget-2048.log" 2>&1
      log "bench-step-budget done" ;;
    smoke-bench)
      env OUT="$R/smoke-bench" MODEL=llama31-8b BENCH_MODES="vosti default" CONTEXTS=1024,8192 BATCHES=4 DECODE=128 \
        MODE_TIMEOUT=240 bash integration/gpu/session.sh bench > "$R/smoke-bench.log" 2>&1; log "smoke-bench done" ;;
    *) log "unknown step $step" ;;
  esac
done
log "ALL DONE"
