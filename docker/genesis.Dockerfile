# gpuenv/genesis: Genesis (genesis-world) on its CPU backend, torch's CPU wheel, OpenGL's libraries (Genesis needs them headless).
# Build: gpuenv images build genesis. Run: docker run --rm gpuenv/genesis bench
# BASE is gpuenv/base (docker/base.Dockerfile, itself pinned by tag and digest), built first.
ARG BASE=gpuenv/base:latest
# hadolint ignore=DL3006
FROM ${BASE}

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# The Debian packages the genesis backend declares (SystemPackage in gpuenv.backends.genesis: OpenGL's
# libraries, which Genesis needs even headless, and X's XRender), passed by `gpuenv images build` and the bake file.
ARG SYSTEM_PACKAGES
# hadolint ignore=DL3008,SC2086
RUN test -n "$SYSTEM_PACKAGES" || { echo "SYSTEM_PACKAGES is empty: build with gpuenv images build genesis"; exit 1; }; \
    apt-get update && apt-get install -y --no-install-recommends $SYSTEM_PACKAGES && rm -rf /var/lib/apt/lists/*
ARG LOCK=docker/locks/genesis.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="genesis"

# Every package from the hash-locked lock file (make locks); torch is the CPU wheel (SB3 trains on CPU).
COPY ${LOCK} /opt/gpuenv/lock.txt
# The CPU torch wheel comes from TORCH_INDEX, or from wheels in docker/wheels/ (the build command
# fills it where the host has them; TORCH_INDEX is then empty: no retries against an unreachable index).
# A host CA bundle, where registry access needs one, comes as the build secret `pipcert`.
# Wheels only, but for pygltflib 1.16.0 (genesis-world's exact pin): PyPI has only its source, a
# pure-Python package, built here from the hash-checked sdist.
RUN --mount=type=bind,source=docker/wheels,target=/wheels \
    --mount=type=secret,id=pipcert \
    if [ -f /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: --no-binary=pygltflib --find-links /wheels \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r /opt/gpuenv/lock.txt

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites
# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

ENV GPUENV_IMAGE=genesis \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
