"""Test-only backend plug-in: behaves, or fails on purpose, so the runner can be tested for real.

Registered by the tests (tests/conftest.py puts tests/plugins on PYTHONPATH and names this module in
GPUENV_PLUGINS, so worker processes find it too). Variants: ok | raise | segfault | hang | exit |
unsupported | oom | alloc (64 MiB per env at build) | phasehang (measures as ok; its resets-suppressed
phase, on halfcheetah, hangs) | sigkill (kills itself with SIGKILL, as the OOM killer would). Hidden from `gpuenv list` and never auto-selected. Its native trainer `fake` follows a
scripted learning curve (hyperparameters reach_at_eval, diverge_at_eval, sleep_s, returns).
"""

from __future__ import annotations

from gpuenv.backends.spec import Backend, NativeTask, Trainer

BACKEND = Backend(
    name="fake",
    adapter="gpuenv_fake.adapter",
    requires=(),
    extra="test",
    variants=("ok", "raise", "segfault", "hang", "exit", "unsupported", "oom", "alloc", "phasehang", "sigkill"),
    description="test-only backend that behaves or fails on purpose",
    hidden=True,
    tasks={
        "cartpole": NativeTask("fake-cartpole", 0.02, 1, 0.02, 500, (4,), "discrete", 2, "test-only", max_return=500.0),
        "halfcheetah": NativeTask("fake-halfcheetah", 0.05, 5, 0.01, 1000, (17,), "discrete", 2, "test-only"),
        "pong": NativeTask("fake-pong", None, 4, None, 27000, (4, 84, 84), "discrete", 6, unsupported="fake has no pixels"),
    },
    trainers=(
        Trainer(
            "fake",
            "test-only trainer with a scripted learning curve",
            frozenset("reach_at_eval diverge_at_eval sleep_s returns".split()),
            "gpuenv_fake.trainer:train",
        ),
    ),
)
