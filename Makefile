# Set-up and entry points. `make demo` and `make test` work on a fresh machine: each creates
# the virtual environment it needs (.venv; .venv-dgl for the DGL tests) and installs into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DGLENV := .venv-dgl

.PHONY: demo test test-main test-dgl lint bench bench-peers bench-gather clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned (from the package registry only)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test,pyg,bench,s3,dask,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/featurestore demo

test: test-main test-dgl

# two workers (pytest-xdist), each test file in one of them: ~110 s on 2 cores against ~165 s
test-main: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadfile

# pyflakes, pycodestyle, bugbear, pyupgrade and numpydoc docstrings on the public API
# (pyproject.toml [tool.ruff])
lint: $(STAMP)
	$(BIN)/ruff check .

# DGL 2.1.0 (the newest on PyPI) needs torch <= 2.2.1 and numpy 1.x: its own environment
$(DGLENV)/.dgl-env-complete: scripts/dgl-env.sh scripts/dgl-constraints.txt pyproject.toml
	scripts/dgl-env.sh $(DGLENV)

test-dgl: $(DGLENV)/.dgl-env-complete
	NUMBA_CACHE_DIR=$(DGLENV)/numba-cache FEATURESTORE_REQUIRE_DGL=1 DGLBACKEND=pytorch \
	  $(DGLENV)/bin/pytest tests/loaders/dgl_tests tests/featurestore -q -p no:cacheprovider

# PyG's sampler needs torch-sparse (PyPI has only sources: ~1 h to build on 2 cores); prebuilt
# wheels for torch 2.13.0+cpu / CPython 3.11 are used when present, else built once and cached.
WHEELS ?= ../shared/wheels
WHEELCACHE := .cache/wheels
bench-peers: $(STAMP)
	@if ls $(WHEELS)/torch_s*.whl >/dev/null 2>&1; then $(BIN)/pip install --quiet $(WHEELS)/torch_s*.whl; \
	else mkdir -p $(WHEELCACHE); ls $(WHEELCACHE)/torch_sparse*.whl >/dev/null 2>&1 || \
	  $(BIN)/pip wheel --no-build-isolation --no-deps -w $(WHEELCACHE) torch-scatter==2.1.2 torch-sparse==0.6.18; \
	  $(BIN)/pip install --quiet $(WHEELCACHE)/torch_s*.whl; fi

# the out-of-core loader runs under memcap (benchmarks.workload.memcap_command)
MEMCAP ?= ../shared/tools/memcap
bench: bench-peers
	FEATURESTORE_MEMCAP=$${FEATURESTORE_MEMCAP:-$(abspath $(MEMCAP))} \
	  $(BIN)/featurestore bench all --scale 0.01 --plot --workdir bench-data --out bench-results

bench-gather: $(STAMP)
	$(BIN)/featurestore bench gather --workdir bench-data --json bench-data/gather.json

clean:
	rm -rf $(VENV) $(DGLENV) bench-data bench-results .cache .pytest_cache
