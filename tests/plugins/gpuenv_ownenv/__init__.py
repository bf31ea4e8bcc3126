"""Test plug-in: the fake adapter in its own Python 3.12 environment (built from a lock with uv)."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Environment, NativeTask

BACKEND = Backend(
    name="ownenv",
    adapter="gpuenv_fake.adapter",
    requires=(),
    extra="test",
    variants=("ok",),
    description="test-only: the fake stepper, run by a Python 3.12 interpreter of its own",
    tasks={"cartpole": NativeTask("fake-cartpole", 0.02, 1, 0.02, 500, (4,), "discrete", 2, "test-only")},
    packages=("pydantic",),
    environment=Environment(python="3.12", lock="tests/plugins/envlock/py312.txt"),
)
