# Shared base of the gpuenv Python images (gymnasium, envpool, brax, mjx): Python 3.11 pinned by tag
# and digest (the default of PYTHON_BASE), a virtual environment, a non-root user whose home any uid
# can use, and the `gpuenv` entry point. Each backend's Dockerfile adds its hash-locked packages and
# the gpuenv source. Built by `gpuenv images build` (plain `docker build`, any engine) or the bake
# file. Where the pinned base cannot be pulled, `gpuenv images build` passes a local Debian bookworm
# (debootstrap) as PYTHON_BASE, and records say which base an image was built from.
ARG PYTHON_BASE=python:3.11-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84
# hadolint ignore=DL3006
FROM ${PYTHON_BASE}
ARG PYTHON_BASE

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/gpuenv/src \
    GPUENV_SUITES_DIR=/opt/gpuenv/suites \
    GPUENV_BASE_IMAGE=${PYTHON_BASE} \
    HOME=/home/gpuenv

# gpuenv runs from its source tree (no pip install of itself, so every pip install is from a lock).
# The home is writable by any uid, and HOME points there whatever the uid (CI runners and `docker run
# --user` pass their own, which /etc/passwd does not know: Docker would set HOME=/). apt-get retries a
# failed download (every image that installs Debian packages builds on this one): one dropped connection
# to Debian's mirror once failed a CI build.
COPY docker/gpuenv-entrypoint.sh /usr/local/bin/gpuenv
RUN python3 -m venv /opt/venv \
    && echo 'Acquire::Retries "5";' > /etc/apt/apt.conf.d/80-gpuenv-retries \
    && chmod 0755 /usr/local/bin/gpuenv \
    && useradd --create-home --uid 1000 --shell /bin/bash gpuenv \
    && chmod 1777 /home/gpuenv
