"""The far side of a served PPO env (gpuenv.backends.served): a backend whose simulator lives in its own
Python environment (Backend.environment, without torch or Stable-Baselines3) builds its PPO env there,
in this process, and steps it for a trainer in the main install over two pipes.

Standard library and numpy only, so it runs in any backend's environment (whatever its numpy).

    python -m gpuenv.backends.serve_env READ_FD WRITE_FD

Protocol: every message is a frame, `<u32 header length><JSON header><the arrays' bytes>`; the header
lists its arrays as [name, dtype, shape]. Arrays go as raw bytes, never pickled: two numpy majors
(1.x here, 2.x in the trainer) do not read each other's pickles.
  trainer -> env   {"open": factory, "native": NativeTask fields, "variant", "num_envs", "seed"}
                   {"reset": true}   {"step": true} + actions   {"close": true}
  env -> trainer   {"num_envs", "observation_space", "action_space", "details"} (+ box bounds), then
                   obs for a reset; obs, rewards, dones, truncated, final rows for a step;
                   {"error": one line, "kind": its exception's class} and exit, for any failure
                   (its traceback on stderr).
The factory (Backend.ppo_env.factory) returns (env, details) as everywhere; its env keeps SB3's VecEnv
contract (gpuenv.backends.vecenv) as `reset() -> obs` and `step(actions) -> (obs, rewards, dones,
infos)`, and needs no SB3 base class.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import traceback
from typing import Any, BinaryIO

import numpy as np

from gpuenv.errors import first_line

HEADER = struct.Struct("<I")


def send(out: BinaryIO, header: dict[str, Any], **arrays: np.ndarray) -> None:
    parts = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    head = json.dumps({**header, "arrays": [[k, a.dtype.str, list(a.shape)] for k, a in parts.items()]}).encode()
    out.write(HEADER.pack(len(head)) + head + b"".join(a.tobytes() for a in parts.values()))
    out.flush()


def _exactly(inp: BinaryIO, n: int) -> bytes:
    data = inp.read(n)
    if data is None or len(data) != n:
        raise EOFError("the other side closed the pipe")
    return data


def receive(inp: BinaryIO) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    (size,) = HEADER.unpack(_exactly(inp, HEADER.size))
    header = json.loads(_exactly(inp, size))
    arrays = {}
    for name, dtype, shape in header.pop("arrays"):
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(_exactly(inp, count * dt.itemsize), dtype=dt).reshape(tuple(shape))
    return header, arrays


def describe_space(space: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A gym/gymnasium space as JSON plus its bounds (Box) -> gpuenv.backends.served.space_of."""
    if hasattr(space, "n"):
        return {"kind": "discrete", "n": int(space.n)}, {}
    if hasattr(space, "low") and hasattr(space, "high"):
        return {"kind": "box", "dtype": np.dtype(space.dtype).str}, {"low": np.asarray(space.low), "high": np.asarray(space.high)}
    raise ValueError(f"a served env's space must be Discrete or Box, not {type(space).__name__}")


def step_frame(env: Any, actions: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One step of every env, as arrays: the infos' truncation flags and final observations (where the
    env kept them) become masks and rows."""
    obs, rewards, dones, infos = env.step(actions)
    dones = np.asarray(dones, dtype=bool)
    done_idx = np.flatnonzero(dones)
    truncated = np.zeros(len(dones), dtype=bool)
    final_idx = [int(i) for i in done_idx if infos[i].get("terminal_observation") is not None]
    for i in done_idx:
        truncated[i] = bool(infos[i].get("TimeLimit.truncated", False))
    arrays = {"obs": np.asarray(obs), "rewards": np.asarray(rewards, dtype=np.float32), "dones": dones, "truncated": truncated,
              "final_idx": np.asarray(final_idx, dtype=np.int64)}
    if final_idx:
        arrays["final_obs"] = np.stack([np.asarray(infos[i]["terminal_observation"]) for i in final_idx])
    return {}, arrays


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    from gpuenv.backends.spec import NativeTask, resolve

    header, _ = receive(inp)
    native = header["native"]
    env, details = resolve(header["open"])(header["variant"], NativeTask(**{**native, "obs_shape": tuple(native["obs_shape"])}),
                                  int(header["num_envs"]), int(header["seed"]))
    try:
        obs_desc, obs_bounds = describe_space(env.observation_space)
        act_desc, act_bounds = describe_space(env.action_space)
        send(out, {"num_envs": int(env.num_envs), "observation_space": obs_desc, "action_space": act_desc, "details": details},
             **{f"obs_{k}": v for k, v in obs_bounds.items()}, **{f"act_{k}": v for k, v in act_bounds.items()})
        while True:
            try:
                cmd, arrays = receive(inp)
            except EOFError:  # the trainer is gone: so is this
                return
            if cmd.get("reset"):
                send(out, {}, obs=np.asarray(env.reset()))
            elif cmd.get("step"):
                header, frame = step_frame(env, arrays["actions"])
                send(out, header, **frame)
            elif cmd.get("close"):
                return
            else:
                raise ValueError(f"unknown command {sorted(cmd)}")
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001 - a failing close must not replace the error that ended the loop
            traceback.print_exc()


def main(argv: list[str]) -> int:
    inp = os.fdopen(int(argv[0]), "rb", buffering=1 << 16)
    out = os.fdopen(int(argv[1]), "wb", buffering=1 << 16)
    try:
        serve(inp, out)
    except Exception as e:  # noqa: BLE001 - any failure goes back to the trainer as one line (its kind kept), and this process ends
        traceback.print_exc()  # the whole story, on the worker's stderr
        try:
            send(out, {"error": first_line(e), "kind": type(e).__name__})
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
