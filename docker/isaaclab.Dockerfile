# gpuenv/isaaclab: Isaac Lab 3.0 kit-less (Newton physics, MuJoCo-Warp solver; no Isaac Sim, no Kit)
# on Python 3.12, every package from the hash-locked lock (torch is PyPI's CUDA 13 build, which Isaac
# Lab pins; it runs on the CPU too). Build: gpuenv images build isaaclab.
# Run: docker run --rm --gpus all gpuenv/isaaclab bench --suite isaaclab   (make bench-isaac)
# Without a GPU: -e GPUENV_CPU_OK=1 runs Newton on the CPU, records marked as CPU fallback.
# Python 3.12 pinned by tag and digest (the default of PYTHON_BASE); where it cannot be pulled,
# `gpuenv images build` passes a local stand-in (Debian bookworm with a Python 3.12 of this machine's)
# and records say which base an image was built from.
ARG PYTHON_BASE=python:3.12-slim-bookworm@sha256:782412e85d0f0984994c290652577d4018aff08145c85b262bb63dc0c7522254
# hadolint ignore=DL3006
FROM ${PYTHON_BASE}
ARG PYTHON_BASE

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG TORCH_INDEX=""
ARG LOCK=docker/locks/isaaclab.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="isaaclab"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/gpuenv/src \
    GPUENV_SUITES_DIR=/opt/gpuenv/suites \
    GPUENV_BASE_IMAGE=${PYTHON_BASE} \
    HOME=/home/gpuenv

COPY docker/gpuenv-entrypoint.sh /usr/local/bin/gpuenv
RUN python3 -m venv /opt/venv \
    && chmod 0755 /usr/local/bin/gpuenv \
    && useradd --create-home --uid 1000 --shell /bin/bash gpuenv \
    && chmod 1777 /home/gpuenv

COPY ${LOCK} /opt/gpuenv/lock.txt
# A host CA bundle, where registry access needs one, comes as the build secret `pipcert`.
# Wheels only, but for antlr4-python3-runtime 4.9.3 (omegaconf's pin, through hydra): PyPI has only
# its source, a pure-Python package, built here from the hash-checked sdist.
RUN --mount=type=secret,id=pipcert \
    if [ -f /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: --no-binary=antlr4-python3-runtime \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r /opt/gpuenv/lock.txt

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites

# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

# Warp's kernel cache and the substitute assets live under HOME/.cache (gpuenv's own folders): a
# volume on /home/gpuenv/.cache keeps the kernels warm across runs.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=${CUDA_REQUIRE}" \
    GPUENV_MIN_DRIVER=${MIN_DRIVER} \
    GPUENV_REQUIRE_GPU=1 \
    GPUENV_IMAGE=isaaclab \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench", "--suite", "isaaclab"]
