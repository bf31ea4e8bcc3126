#!/bin/sh
# The images' entry point: `docker run gpuenv/<backend> bench` runs `gpuenv bench` in the image.
exec "${GPUENV_PYTHON:-python}" -m gpuenv "$@"
