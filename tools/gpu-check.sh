#!/usr/bin/env bash
# make gpu-check: the GPU parts of the decision (gpuenv gpu-check). Where the project's environment
# is (.venv, `make install`), it runs there: the CPU test of this script (GPUENV_CPU_OK=1). On a GPU
# machine without it, where JAX and torch with CUDA are installed and nothing can be downloaded, the
# machine's python3 runs gpuenv from this checkout's src/ with the wheelhouse (.whl/, made by `make
# gpu-wheels` where there is internet) installed beside it with --no-deps: the machine's own JAX,
# torch, flax and numpy stay as they are. Arguments go to `gpuenv gpu-check` (--out, --budget).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then
    py=.venv/bin/python
elif compgen -G ".whl/*.whl" >/dev/null; then
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
