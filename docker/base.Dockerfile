# syntax=docker/dockerfile:1.7
# Shared base of the gpuenv Python images (gymnasium, envpool, brax, mjx): Python 3.11 pinned by
# tag and digest, a non-root user, and the `gpuenv` entry point. Each backend's Dockerfile adds its
# hash-locked packages and the gpuenv source. Built through docker/docker-bake.json (make images).
FROM python:3.11-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/opt/gpuenv/src \
    GPUENV_SUITES_DIR=/opt/gpuenv/suites

# gpuenv runs from its source tree (no pip install of itself, so every pip install is from a lock).
COPY docker/gpuenv-entrypoint.sh /usr/local/bin/gpuenv
RUN chmod 0755 /usr/local/bin/gpuenv \
    && useradd --create-home --uid 1000 --shell /bin/bash gpuenv
