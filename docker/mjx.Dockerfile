# gpuenv/mjx: MuJoCo MJX on JAX's CUDA 13 wheels.
# Build: gpuenv images build mjx. Run: docker run --rm --gpus all gpuenv/mjx bench
# BASE is gpuenv/base (docker/base.Dockerfile, itself pinned by tag and digest), built first.
ARG BASE=gpuenv/base:latest
# hadolint ignore=DL3006
FROM ${BASE}

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
# torch is PyPI's CUDA 13 build, locked with JAX's CUDA 13 wheels: no extra index.
ARG TORCH_INDEX=""
# `make image-mjx BRAX_VERSION=...` (etc.) builds from a version lock instead, and tags its records.
ARG LOCK=docker/locks/mjx.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="mjx"

# Every package from the hash-locked lock file (make locks): JAX's CUDA 13 plugin and torch's CUDA 13
# build resolved together, so both load the same nvidia-cudnn-cu13 (one cuDNN in the process; the
# shared PPO policy trains on the GPU, `policy_device` in the records).
COPY ${LOCK} /opt/gpuenv/lock.txt
# A host CA bundle, where registry access needs one, comes as the build secret `pipcert`.
# (No local wheel directory here: a host's CPU torch wheel would satisfy ==2.13.0 and fail the hash.)
RUN --mount=type=secret,id=pipcert \
    if [ -f /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: \
      ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -r /opt/gpuenv/lock.txt

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites

# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

# The driver comes from the host; the NVIDIA runtime refuses to start on one older than CUDA_REQUIRE,
# and `gpuenv doctor` (run before every bench here) names the minimum driver. JAX must not fall back
# to the CPU silently: GPUENV_REQUIRE_GPU makes that an error.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=${CUDA_REQUIRE}" \
    GPUENV_MIN_DRIVER=${MIN_DRIVER} \
    GPUENV_REQUIRE_GPU=1 \
    GPUENV_IMAGE=mjx \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
