#!/usr/bin/env bash
# Build the DGL test/benchmark environment .venv-dgl (separate from .venv).
#
# dgl 2.1.0 is the newest DGL wheel for Linux on PyPI; it supports torch 2.0.0-2.2.1 only and is
# built against numpy 1.x. So this environment pins torch 2.2.1 (the PyPI build is the CUDA one,
# ~3 GB, and runs on the CPU), numpy 1.26 and versions of our dependencies that work with them.
#
# Usage: scripts/dgl-env.sh [VENV_DIR]      (default: .venv-dgl in the repository root)
# Idempotent: re-running on a complete environment only re-checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
export DGLBACKEND=pytorch   # else dgl's first import writes ~/.dgl/config.json and says so
VENV="${1:-.venv-dgl}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.dgl-env-complete"
CONSTRAINTS=scripts/dgl-constraints.txt   # the exact versions this environment was tested with
# pyproject.toml: the package's metadata (its entry points: the featurestore commands) is reinstalled
if [ ! -f "$STAMP" ] || [ "$0" -nt "$STAMP" ] || [ "$CONSTRAINTS" -nt "$STAMP" ] \
        || [ pyproject.toml -nt "$STAMP" ]; then
    "$VENV/bin/pip" install --quiet --upgrade pip
    # pyarrow < 26: pyarrow 26 needs numpy 2 at import but does not declare it
    "$VENV/bin/pip" install -c "$CONSTRAINTS" \
        "dgl==2.1.0" "torch==2.2.1" "torchdata==0.7.1" "pandas<3" "pydantic>=2" \
        "numpy>=1.26,<2" "numba>=0.59,<0.62" "zarr>=3.1,<3.2" "pyarrow>=14,<26" "fsspec>=2024.2" \
        "google-crc32c>=1.5" "tqdm>=4.60" "pyyaml>=6" "tbb>=2021.6" "scipy>=1.11" \
        "pytest>=8" "hypothesis>=6" "aiohttp>=3.9" "requests>=2.31"
    "$VENV/bin/pip" install --quiet --no-deps -e .
    touch "$STAMP"
fi
# Smoke check: dgl imports on this torch and our package imports on numpy 1.x.
"$VENV/bin/python" - <<'PY'
import numpy, pyarrow, torch, dgl, featurestore, loaders
assert numpy.__version__.startswith("1."), numpy.__version__
print(f"dgl {dgl.__version__}, torch {torch.__version__}, numpy {numpy.__version__}: ok")
PY
