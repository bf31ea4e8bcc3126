# gpuenv/isaaclab-isaacsim: Isaac Lab 2.3 on Isaac Sim 5.1 (Python 3.11), NVIDIA's own image pinned by tag and
# digest, with gpuenv's few dependencies from its hash-locked lock file. Needs an RTX-class GPU and
# the NVIDIA container runtime with graphics capabilities (Isaac Sim uses Vulkan even headless).
# Build: make image-isaaclab-isaacsim. Run: docker run --rm --gpus all gpuenv/isaaclab-isaacsim bench
# NOT VERIFIED: no machine available to this project could build or run this image (see README).
FROM nvcr.io/nvidia/isaac-lab:2.3.2@sha256:388dbc806f48359a964cb9f807feb226da95d0a107f470fdcad9780ea10fe6f2

ARG MIN_DRIVER=""
ARG CUDA_REQUIRE=""
LABEL org.opencontainers.image.source="https://github.com/gpuenv/gpuenv" \
      org.gpuenv.backend="isaaclab"

# Isaac Lab's Python (Isaac Sim's 3.11 with Isaac Lab, torch and rsl_rl installed) runs gpuenv. Its
# numpy (1.x) and psutil stay as they are: the lock leaves them out.
ENV GPUENV_PYTHON=/workspace/isaaclab/_isaac_sim/python.sh \
    PYTHONPATH=/opt/gpuenv/src \
    GPUENV_SUITES_DIR=/opt/gpuenv/suites \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

COPY docker/locks/isaaclab-isaacsim.txt /opt/gpuenv/lock.txt
RUN /workspace/isaaclab/_isaac_sim/python.sh -m pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: \
      -r /opt/gpuenv/lock.txt

COPY docker/gpuenv-entrypoint.sh /usr/local/bin/gpuenv
COPY pyproject.toml /opt/gpuenv/
COPY src /opt/gpuenv/src
COPY suites /opt/gpuenv/suites

ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=all \
    NVIDIA_REQUIRE_CUDA="cuda>=${CUDA_REQUIRE}" \
    GPUENV_MIN_DRIVER=${MIN_DRIVER} \
    GPUENV_REQUIRE_GPU=1 \
    GPUENV_IMAGE=isaaclab-isaacsim \
    ACCEPT_EULA=Y \
    OMNI_KIT_ACCEPT_EULA=YES

# Isaac Sim writes its caches and logs under its install tree: give them to the non-root user.
RUN chmod 0755 /usr/local/bin/gpuenv \
    && (id -u 1000 >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash gpuenv) \
    && mkdir -p /isaac-sim/kit/cache /isaac-sim/kit/logs /isaac-sim/kit/data \
    && chown -R 1000:1000 /isaac-sim/kit/cache /isaac-sim/kit/logs /isaac-sim/kit/data /workspace/isaaclab

# The per-commit build args (images.build.COMMIT_ARGS) come after the last RUN: an ARG is in the
# environment of every later RUN, so one declared earlier would reinstall every package at each commit.
ARG GIT_SHA=unknown
ARG GIT_DIRTY=""
ARG GPUENV_VERSION=unknown
ENV GPUENV_GIT_SHA=${GIT_SHA} \
    GPUENV_GIT_DIRTY=${GIT_DIRTY} \
    GPUENV_PACKAGE_VERSION=${GPUENV_VERSION}

USER 1000:1000
WORKDIR /home/gpuenv
ENTRYPOINT ["gpuenv"]
CMD ["bench", "--suite", "isaaclab-isaacsim"]
