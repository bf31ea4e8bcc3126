# gpuenv: the two commands a newcomer needs are `make bench` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
GPUENV := $(BIN)/gpuenv
STAMP := $(VENV)/.installed
BACKENDS := gymnasium envpool brax mjx

.PHONY: install bench bench-overhead test test-fast smoke list info clean $(addprefix bench-,$(BACKENDS))

# torch first, pinned, so pip takes the CPU wheel instead of GBs of CUDA (see README).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[cpu,test]"
	touch $(STAMP)

install: $(STAMP)

## The main job: the quick throughput suite on every backend this machine can run.
bench: $(STAMP)
	$(GPUENV) bench --suite quick $(ARGS)

## Run one backend's suites locally (the container issue makes these run the backend's image).
$(addprefix bench-,$(BACKENDS)): bench-%: $(STAMP)
	$(GPUENV) bench --suite quick --backend $* $(ARGS)

## The harness's own cost: gpuenv vs a hand-written loop, EnvPool and Brax, one run.
bench-overhead: $(STAMP)
	$(BIN)/python bench/overhead.py $(ARGS)

smoke: $(STAMP)
	$(GPUENV) bench --suite smoke $(ARGS)

## All tests, including the real-backend ones (tiny sizes).
test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

## Unit tests only (no simulator runs).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not backend" $(PYTEST_ARGS)

list: $(STAMP)
	$(GPUENV) list

info: $(STAMP)
	$(GPUENV) info

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
