#!/usr/bin/env bash
# Device side, after ../shared/gpu staging: unpack the repo snapshot .stage/tree.tar into ${1:-/root/w}, the
# verifier proof cache .stage/vcache.tar into /root/vc (set VOSTI_CACHE_DIR=/root/vc), install z3 (.whl/) and
# vosti-plugin into /tmp/site (the entry point vLLM's plugin loader finds). See integration/gpu/README.md.
set -e
dest=${1:-/root/w}
rm -rf "$dest" && mkdir -p "$dest" /root/vc && tar -xf .stage/tree.tar -C "$dest" && tar -xf .stage/vcache.tar -C /root/vc
python3 -c "import z3" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/z3_solver-*.whl
cd "$dest" && python3 -m pip install -q --no-deps --no-build-isolation --upgrade --target /tmp/site . 2>&1 | tail -2
