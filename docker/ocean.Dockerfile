# gpuenv/ocean: PufferLib Ocean's C environments and PufferLib's own trainer (PufferAI's pufferlib 3.0.0, built from its
# sdist with gcc and g++ against torch's CPU wheel), numpy<2.
# Build: gpuenv images build ocean. Run: docker run --rm gpuenv/ocean bench
# BASE is gpuenv/base (docker/base.Dockerfile, itself pinned by tag and digest), built first.
ARG BASE=gpuenv/base:latest
# hadolint ignore=DL3006
FROM ${BASE}

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG LOCK=docker/locks/ocean.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="ocean"

# Every package from the hash-locked lock file (make locks). Wheels only, but for gym 0.23.0 (Ocean's
# runtime imports it; PyPI has only its source, a pure-Python package built here from the hash-checked sdist).
# torch is the CPU wheel (pufferl trains on the CPU here): from TORCH_INDEX, or from wheels in docker/wheels/
# (the build command fills it where the host has them; TORCH_INDEX is then empty).
# A host CA bundle, where registry access needs one, comes as the build secret `pipcert`.
COPY ${LOCK} /opt/gpuenv/lock.txt
RUN --mount=type=bind,source=docker/wheels,target=/wheels \
    --mount=type=secret,id=pipcert \
    if [ -f /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: --no-binary=gym --find-links /wheels \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r /opt/gpuenv/lock.txt

# pufferlib 3.0.0 from its sha256-checked sdist, without the GitHub downloads its setup.py makes
# (gpuenv.backends.ocean.build, standard library only: it runs before gpuenv's source is copied in, so a
# change to gpuenv does not rebuild it). BUILD_PACKAGES are the build-role Debian packages the ocean backend
# declares (SystemPackage in gpuenv.backends.ocean: gcc for the C envs, g++ for the torch extension
# pufferlib._C, libc's headers, Python's headers, passed by `gpuenv images build`); python3-dev is left out where
# the base has Python.h of its own (python:3.11-slim); all are removed in the same layer.
COPY src/gpuenv/backends/ocean/build.py /opt/gpuenv/ocean_build.py
ARG BUILD_PACKAGES
# hadolint ignore=DL3008,SC2016,SC2086
RUN --mount=type=secret,id=pipcert \
    test -n "$BUILD_PACKAGES" || { echo "BUILD_PACKAGES is empty: build with gpuenv images build ocean"; exit 1; }; \
    if [ -f /run/secrets/pipcert ]; then export SSL_CERT_FILE=/run/secrets/pipcert; fi; \
    headers="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h"; pkgs=""; \
    for p in $BUILD_PACKAGES; do if [ "$p" != python3-dev ] || [ ! -f "$headers" ]; then pkgs="$pkgs $p"; fi; done; \
    apt-get update && apt-get install -y --no-install-recommends $pkgs \
    && python /opt/gpuenv/ocean_build.py /tmp/downloads \
    && apt-get purge -y --auto-remove $pkgs && rm -rf /var/lib/apt/lists/* /tmp/downloads /opt/gpuenv/ocean_build.py

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites
# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

ENV GPUENV_IMAGE=ocean \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
