#!/usr/bin/env bash
# GPU check for the loader (run when a GPU machine is lent; about 5 minutes on an H200).
#
#   benchmarks/gpu_check.sh [WORKDIR] [--parts h2d,eq,loader,train,peer,ooc]
#
# What each part measures: benchmarks/gpu_check.py (one JSON line per check; exits non-zero
# if a correctness check fails). PYTHON=... picks the interpreter; FEATURESTORE_MEMCAP=path
# runs the out-of-core part under memcap where a cgroup can be made; GPU_CHECK_LOG=file keeps
# the JSON lines.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
WORK="${1:-$(mktemp -d /tmp/gpu-check.XXXXXX)}"
shift || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout 600 "$PY" -m benchmarks.gpu_check "$WORK" "$@"
