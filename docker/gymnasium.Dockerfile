# syntax=docker/dockerfile:1.7
# gpuenv/gymnasium: the CPU baseline: Gymnasium + MuJoCo + ALE, Stable-Baselines3 (SubprocVecEnv/DummyVecEnv).
# Build: make image-gymnasium (docker buildx bake, docker/docker-bake.json). Run: docker run --rm gpuenv/gymnasium bench
# `base` is the bake context target:base (docker/base.Dockerfile), itself pinned by tag and digest.
# hadolint ignore=DL3006
FROM base

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG GIT_SHA=unknown
# `make image-gymnasium BRAX_VERSION=...` (etc.) builds from a version lock instead, and tags its records.
ARG LOCK=docker/locks/gymnasium.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="gymnasium"

# Every package from the hash-locked lock file (make locks); torch is the CPU wheel (SB3 trains on CPU).
COPY ${LOCK} /opt/gpuenv/lock.txt
RUN pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: \
      --extra-index-url https://download.pytorch.org/whl/cpu -r /opt/gpuenv/lock.txt

COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites
ENV GPUENV_IMAGE=gymnasium \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
