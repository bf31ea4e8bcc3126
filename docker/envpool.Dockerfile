# gpuenv/envpool: EnvPool (C++ thread pool), Stable-Baselines3 through gpuenv's EnvPool adapter.
# Build: gpuenv images build envpool. Run: docker run --rm gpuenv/envpool bench
# BASE is gpuenv/base (docker/base.Dockerfile, itself pinned by tag and digest), built first.
ARG BASE=gpuenv/base:latest
# hadolint ignore=DL3006
FROM ${BASE}

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# `make image-envpool BRAX_VERSION=...` (etc.) builds from a version lock instead, and tags its records.
ARG LOCK=docker/locks/envpool.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="envpool"

# Every package from the hash-locked lock file (make locks); torch is the CPU wheel (SB3 trains on CPU).
COPY ${LOCK} /opt/gpuenv/lock.txt
# The CPU torch wheel comes from TORCH_INDEX, or from wheels in docker/wheels/ (the build command
# fills it where the host has them; TORCH_INDEX is then empty: no retries against an unreachable index).
# A host CA bundle, where registry access needs one, comes as the build secret `pipcert`.
RUN --mount=type=bind,source=docker/wheels,target=/wheels \
    --mount=type=secret,id=pipcert \
    if [ -f /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: --find-links /wheels \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r /opt/gpuenv/lock.txt

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites
# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

ENV GPUENV_IMAGE=envpool \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
