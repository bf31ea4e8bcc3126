# gpuenv/godot: Godot 4.6 (Debian sid's godot, GodotPhysics and Jolt) and Godot 3.2 headless (Debian
# bookworm's godot3-server, pinned) with gpuenv's BallChase for both, godot-rl's client (locked
# without its pins) and Stable-Baselines3 for PPO.
# Build: gpuenv images build godot. Run: docker run --rm gpuenv/godot bench --suite godot
# BASE is gpuenv/base (docker/base.Dockerfile, itself pinned by tag and digest), built first.
# GODOT4_BASE is Debian sid with godot, made by gpuenv before the build (debootstrap, or this
# machine's /opt/gpuenv-godot4: gpuenv.images.base.sid_godot); only Godot and its libraries are copied.
ARG BASE=gpuenv/base:latest
ARG GODOT4_BASE=gpuenv/local-sid-godot4:latest
# hadolint ignore=DL3006
FROM ${GODOT4_BASE} AS godot4

# hadolint ignore=DL3006
FROM ${BASE}

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG LOCK=docker/locks/godot.txt
ARG VERSION_SET=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="godot4"

# The Debian packages its backends declare (SystemPackage in gpuenv.backends.godot: bookworm's headless
# Godot 3.2 server, at the version the godot backend was measured with), passed by `gpuenv images build`.
ARG SYSTEM_PACKAGES
# hadolint ignore=DL3008,SC2086
RUN test -n "$SYSTEM_PACKAGES" || { echo "SYSTEM_PACKAGES is empty: build with gpuenv images build godot"; exit 1; }; \
    apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $SYSTEM_PACKAGES \
    && rm -rf /var/lib/apt/lists/*

# Godot 4 with sid's libc and libraries, run through sid's own loader (the godot4 launcher below).
COPY --from=godot4 /usr/lib/x86_64-linux-gnu /opt/gpuenv-godot4/usr/lib/x86_64-linux-gnu
COPY --from=godot4 /usr/bin/godot /opt/gpuenv-godot4/usr/bin/godot

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
# The godot4 launcher on PATH (the same one `make install` writes on a host), checked by running it.
RUN python3 -m gpuenv.backends.godot4.install && godot4 --headless --version
# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown

ENV GPUENV_IMAGE=godot \
    GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION} \
    GPUENV_LOCK=${LOCK} \
    GPUENV_VERSION_SET=${VERSION_SET}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench"]
