"""Small helpers shared by the host-side adapters (no timing here: the harness owns the clock)."""

from __future__ import annotations

from gpuenv.backends.base import ActionSpace


def action_space_of(space) -> ActionSpace:
    """gymnasium / gym Space -> ActionSpace (duck-typed so EnvPool's gym spaces work too)."""
    if hasattr(space, "n"):
        return ActionSpace("discrete", n=int(space.n))
    return ActionSpace("box", low=tuple(float(x) for x in space.low.ravel()), high=tuple(float(x) for x in space.high.ravel()))


def flat_obs_shape(space) -> tuple[int, ...]:
    """Observation shape; dict observations (dm_control) count as their flattened size."""
    if getattr(space, "shape", None):
        return tuple(int(x) for x in space.shape)
    if hasattr(space, "spaces"):
        total = 0
        for sub in space.spaces.values():
            size = 1
            for d in sub.shape or (1,):
                size *= int(d)
            total += size
        return (total,)
    raise ValueError(f"cannot tell the shape of observation space {space!r}")
