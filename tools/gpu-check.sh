#!/usr/bin/env bash
# make gpu-check: the GPU parts of the decision (gpuenv gpu-check). On a GPU machine with a wheelhouse
# (.whl/, made by `make gpu-wheels` where there is internet), where JAX and torch with CUDA are
# installed and nothing can be downloaded, the machine's python3 (or $PYTHON) runs gpuenv from this
# checkout's src/ with the wheels installed beside it with --no-deps: the machine's own JAX, torch,
# flax and numpy stay as they are (the project's .venv has CPU JAX and torch: no GPU numbers). Without
# a GPU or a wheelhouse, the project's environment (.venv, `make install`) runs it: the CPU test of this
# script (GPUENV_CPU_OK=1). Arguments go to `gpuenv gpu-check` (--out, --budget).
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=no
if compgen -G ".whl/*.whl" >/dev/null; then wheels=yes; fi
gpu=no
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu=yes; fi
if [ -x .venv/bin/python ] && ! { [ $gpu = yes ] && [ $wheels = yes ]; }; then
    py=.venv/bin/python
elif [ $wheels = yes ]; then
    py=${PYTHON:-python3}
    site=${GPUENV_SITE:-${TMPDIR:-/tmp}/gpuenv-site}
    "$py" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
    export PYTHONPATH="$PWD/src:$site${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "error: make gpu-check found neither the project's environment (.venv: make install) nor a wheelhouse (.whl: make gpu-wheels where there is internet, then bring .whl/ along)" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1
exec "$py" -m gpuenv gpu-check "$@"
