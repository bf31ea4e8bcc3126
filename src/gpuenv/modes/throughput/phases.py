"""A throughput case's phases, measured apart in the same worker after the case's own figure, each
with the same protocol (gpuenv.measure.timing: compile chunk, calibration, warm-ups, timed values):

  step        stepping alone, resets suppressed: the adapter's `open_without_resets` on a task whose
              episodes end only at the time limit (gpuenv.tasks: `time_limit_only`); the limit is
              removed, so no env resets inside the measurement
  step+reset  the case's own figure: random actions with the backend's real auto-resets
  vecenv      step+reset through the backend's SB3 VecEnv, wrapped as the shared PPO trainer wraps it
              (VecMonitor, VecNormalize where the definition normalises): the adapter's copies,
              info dicts and reset handling, with random actions
  inference   + the shared PPO policy's forward pass every step (batch = num_envs) on the policy's
              device, its sampled actions stepping the env (SB3's rollout step without the rollout
              buffer, callbacks and value bootstrap of truncated episodes: those are in `collect`)
  collect     SB3's own rollout: PPO.collect_rollouts of n_steps per env (the forward pass, the rollout
              buffer, a callback per step, the value bootstrap of truncated episodes, the advantages
              at the rollout's end); the collection rate the wall-clock model of `gpuenv decide` uses
  learn       the learning alone: SB3 PPO's update (n_epochs over the rollout buffer in minibatches)
              run again and again over one collected rollout; its rate is samples learned per
              second, a cost of the network, batch, epochs and device, not of the simulator (the
              wall-clock model of `gpuenv decide` adds it to the collection rate of `collect`)
  update      + learning: SB3 PPO.learn, one PPO update (n_epochs of minibatches) per rollout of
              n_steps per env; one chunk is one rollout and its update

The shared PPO definition (network, n_steps, batch size, epochs, normalisation) is the `sb3` case of
the task in the `ppo` suite; the record names which. A phase that cannot run on a backend or task is
recorded with the reason (`absent`), one that raised with its error (`failed`): never a number.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from gpuenv.backends.base import Case, action_pool
from gpuenv.backends.spec import NativeTask
from gpuenv.errors import first_line
from gpuenv.measure.timing import MeasureSettings, measure_throughput

PHASES = ("step", "step+reset", "vecenv", "inference", "collect", "learn", "update")
POLICY_PHASES = ("vecenv", "inference", "collect", "learn", "update")
MAIN = "step+reset"
EXTRA = tuple(p for p in PHASES if p != MAIN)
SHARED_PPO_SUITE = "ppo"  # the suite whose sb3 case of a task is the shared PPO definition
HEADERS = {"step": "step", "step+reset": "step+reset", "vecenv": "vecenv", "inference": "+inference", "collect": "collect",
           "learn": "learn",
           "update": "+update"}
LEGEND = (
    "step: resets suppressed (time limit removed, task without termination); step+reset: the case itself; "
    "vecenv: through the shared PPO trainer's VecEnv stack, random actions; +inference: the shared policy's "
    "forward pass picks every action; collect: SB3's rollout (+inference, rollout buffer, callbacks, advantages); learn: PPO's update alone, samples learned per second; +update: SB3 PPO.learn (rollout buffer, value bootstrap and one update per rollout); reset us/env: the wall-clock "
    "microseconds one env's reset adds, amortised over the batch"
)


class Absent(Exception):
    """This phase cannot be measured for this backend/task; the message says why."""


def check_names(names: Any, where: str) -> tuple[str, ...]:
    from gpuenv.errors import UserError

    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{where}: phases must be a list of names from {', '.join(PHASES)}")
    bad = [n for n in names if n not in PHASES]
    if bad:
        raise UserError(f"{where}: unknown phase {bad[0]!r} (known: {', '.join(PHASES)})")
    return tuple(n for n in EXTRA if n in names)  # step+reset is always measured: the case's own figure


# The sizes a suite may set for the policy phases (`phase_ppo`). n_steps changes how long one PPO
# iteration (one chunk of the update phase) takes, not what a sample costs: the update's cost per
# sample is n_epochs x one minibatch's gradient step / batch_size. So a smaller n_steps keeps the
# +update figure of the definition while each timed chunk gets shorter; n_epochs and batch_size
# change the figure itself, and the record names them.
PHASE_PPO_KEYS = {"n_steps": 1, "batch_size": 1, "n_epochs": 1}
PHASE_PPO_MAX = 1 << 20


def check_sizes(table: Any, where: str) -> tuple[tuple[str, int], ...]:
    from gpuenv.errors import UserError

    if not isinstance(table, dict):
        raise UserError(f"{where}: phase_ppo must be a table of sizes, e.g. {{ n_steps = 64 }}")
    for k, v in table.items():
        if k not in PHASE_PPO_KEYS:
            raise UserError(f"{where}: phase_ppo key {k!r} is not a size it can set (known: {', '.join(PHASE_PPO_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, int) or not PHASE_PPO_KEYS[k] <= v <= PHASE_PPO_MAX:
            raise UserError(f"{where}: phase_ppo.{k} must be an integer in 1..{PHASE_PPO_MAX} (got {v!r})")
    return tuple(sorted(table.items()))


@functools.cache
def shared_definition(task: str, backend: str, variant: str) -> tuple[dict, str] | None:
    """(hyperparameters, where they come from) of the task's shared PPO definition, or None."""
    from gpuenv.registry import default_registry
    from gpuenv.suites import load_any
    from gpuenv.tasks import OWN_FAMILY, find_task

    _, suite = load_any(SHARED_PPO_SUITE, default_registry())
    cases = [c for c in suite.cases if c.trainer == "sb3" and c.task == task]
    cases.sort(key=lambda c: (c.backend != backend, c.variant != variant))  # this backend's own case first
    if not cases:
        own = find_task(task)
        if own is not None and own.family == OWN_FAMILY:  # a user's env (gpuenv profile): SB3's own defaults
            return {}, "SB3 PPO's defaults (MlpPolicy): your env has no definition in suites/ppo.toml"
        return None
    c = cases[0]
    return dict(c.hyperparams), f"suites/{SHARED_PPO_SUITE}.toml case {c.key}"


def not_finished(phases: dict) -> dict:
    """What a worker's kept result says of its phases until they are done (run.worker.checkpoint)."""
    return {name: {"failed": NOT_FINISHED} for name in phases["names"]}


NOT_FINISHED = "the worker ended before this phase finished"


def unfinished(phase: dict, incomplete: str | None, timeout_s: float) -> dict:
    """A phase of a worker that was killed or died while it ran: a phase the case's timeout cut off
    is `not_finished` (the table says so, with the time), any other end is `failed` with its cause."""
    if phase.get("failed") != NOT_FINISHED or not incomplete:
        return phase
    if incomplete.startswith("timeout"):
        return {"not_finished_within_s": timeout_s}
    return {**phase, "failed": f"{NOT_FINISHED} ({incomplete})"}


def spec_for(case: Case, names: tuple[str, ...], sizes: tuple[tuple[str, int], ...] = ()) -> dict:
    """The part of a worker spec the phases need (the shared definition looked up once, here), with
    the suite's `phase_ppo` sizes in place of the definition's own (the source says which)."""
    if not names:
        return {}
    policy_phases = [n for n in names if n in POLICY_PHASES]
    ppo = shared_definition(case.task, case.backend, case.variant) if policy_phases else None
    if ppo is None:
        return {"names": list(names), "ppo": None}
    hyperparams, source = ppo
    if sizes:
        hyperparams = {**hyperparams, **dict(sizes)}
        source += " with " + ", ".join(f"{k}={v}" for k, v in sizes) + " (the suite's phase_ppo)"
    return {"names": list(names), "ppo": {"hyperparams": hyperparams, "source": source}}


def learner_key(task: str, hyperparams: dict, device: str, threads: int) -> str:
    """What a `learn` rate is a rate of, as one comparable string: the task (its observation and action
    spaces size the network), the definition's hyperparameters but n_steps (a sample's cost is n_epochs x
    a minibatch step / batch_size, whatever the rollout's length: see PHASE_PPO_KEYS), the policy's
    device and torch's threads. Learning does not depend on the simulator: `gpuenv decide` takes one
    record's learn rate for every backend whose collect phase ran the same learner."""
    import json

    kept = {k: v for k, v in hyperparams.items() if k != "n_steps"}
    return json.dumps({"task": task, "hyperparams": kept, "device": device, "torch_threads": threads}, sort_keys=True)


# --- the steppers (gpuenv.backends.base.Stepper's run/sync) of the policy phases ----------------


class _Steps:
    """Steps a VecEnv `chunk_steps` steps per chunk; `act(obs)` gives the actions."""

    def __init__(self, venv, chunk_steps: int, act: Callable[[Any, int], np.ndarray], sync: Callable[[], None]) -> None:
        self.venv, self.chunk_steps, self.act, self._sync = venv, chunk_steps, act, sync
        self.obs = venv.reset()
        self._i = 0

    def run(self, loops: int) -> None:
        venv, act, obs, i = self.venv, self.act, self.obs, self._i
        for _ in range(loops * self.chunk_steps):
            obs = venv.step(act(obs, i))[0]
            i += 1
        self.obs, self._i = obs, i

    def sync(self) -> None:
        self._sync()


class _Collect:
    """One chunk = one SB3 rollout, PPO.collect_rollouts of n_steps per env into the rollout buffer
    (the advantages computed at its end), with a callback that does nothing: a rollout of PPO.learn
    without the update."""

    def __init__(self, model) -> None:
        from stable_baselines3.common.callbacks import BaseCallback

        class Nothing(BaseCallback):
            def _on_step(self) -> bool:
                return True

        self.model = model
        _, self.callback = model._setup_learn(model.n_steps * model.n_envs, Nothing(), reset_num_timesteps=False)

    def run(self, loops: int) -> None:
        m = self.model
        for _ in range(loops):
            m.collect_rollouts(m.env, self.callback, m.rollout_buffer, n_rollout_steps=m.n_steps)

    def sync(self) -> None:
        pass  # collect_rollouts returns with the actions and values on the host


class _Learn:
    """One chunk = one PPO iteration: a rollout of n_steps per env, then its update."""

    def __init__(self, model) -> None:
        self.model = model

    def run(self, loops: int) -> None:
        self.model.learn(total_timesteps=loops * self.model.n_steps * self.model.n_envs, reset_num_timesteps=False)

    def sync(self) -> None:
        pass  # learn() returns after the update's last optimiser step


class _LearnOnly:
    """One chunk = one PPO update over the rollout buffer, filled once by a real rollout (one
    PPO.learn iteration at setup): the update's cost without the rollout's. Hundreds of updates on
    one rollout over-fit the policy: close() puts back the weights and the optimiser's state it
    started from, so the phases after it (+update) run the policy they would have run."""

    def __init__(self, model) -> None:
        import copy

        self.model = model
        self._saved = copy.deepcopy(model.policy.state_dict()), copy.deepcopy(model.policy.optimizer.state_dict())
        model.learn(total_timesteps=model.n_steps * model.n_envs, reset_num_timesteps=False)  # fills the buffer (and trains once)

    def close(self) -> None:
        weights, optimiser = self._saved
        self.model.policy.load_state_dict(weights)
        self.model.policy.optimizer.load_state_dict(optimiser)

    def run(self, loops: int) -> None:
        for _ in range(loops):
            self.model.train()

    def sync(self) -> None:
        if self.model.device.type == "cuda":
            import torch

            torch.cuda.synchronize()


class _Policy:
    """The shared definition's model and wrapped VecEnv, built once for the policy phases."""

    def __init__(self, case: Case, native: NativeTask, ppo: dict | None) -> None:
        from gpuenv.registry import default_registry

        backend = default_registry().get(case.backend)
        if backend.ppo_env is None:
            raise Absent(f"{case.backend} declares no batched env for the shared PPO trainer")
        if backend.ppo_env.variants is not None and case.variant not in backend.ppo_env.variants:
            raise Absent(f"the shared PPO trainer runs {case.backend} as {', '.join(backend.ppo_env.variants)}, not {case.variant}")
        if ppo is None:
            raise Absent(f"suites/{SHARED_PPO_SUITE}.toml has no sb3 case for {case.task}: no shared PPO definition to run")
        import importlib.util

        if backend.environment is not None and importlib.util.find_spec("stable_baselines3") is None:
            raise Absent(f"{case.backend}'s own environment has no torch or Stable-Baselines3; its env trains served to the main "
                         "install (the time-to-reward suite), not in this worker")
        import torch

        from gpuenv.modes.ttr.train import build_sb3

        self.model, self.venv, self.details = build_sb3(backend, case.variant, native, case.num_envs, case.seed, ppo["hyperparams"])
        self.details.update(definition=ppo["source"], torch_threads=torch.get_num_threads(),
                            learner=learner_key(case.task, ppo["hyperparams"], self.model.device.type, torch.get_num_threads()))
        self.torch = torch
        cuda = self.model.device.type == "cuda"
        self.sync = torch.cuda.synchronize if cuda else (lambda: None)


def _policy_act(p: _Policy) -> Callable[[Any, int], np.ndarray]:
    """SB3's rollout step: obs to a tensor on the policy's device, forward, sample, clip to the box."""
    from gymnasium import spaces
    from stable_baselines3.common.utils import obs_as_tensor

    policy, device, torch = p.model.policy, p.model.device, p.torch
    space = p.venv.action_space
    policy.set_training_mode(False)

    def act(obs, _i):
        with torch.no_grad():
            actions, _values, _log_prob = policy(obs_as_tensor(obs, device))
        a = actions.cpu().numpy()
        if isinstance(space, spaces.Box):
            a = policy.unscale_action(a) if policy.squash_output else np.clip(a, space.low, space.high)
        return a

    return act


def measure_phases(
    phases: dict,
    adapter: Any,
    case: Case,
    native: NativeTask,
    action_space: Any,
    settings: MeasureSettings,
    clock: Callable[[], float],
    done: Callable[[dict], None] = lambda out: None,
) -> dict:
    """{phase: {"env_steps_per_s": [...], "how": ..., ...} | {"absent": why} | {"failed": error}};
    `done(out)` after each phase (the worker keeps what is measured so far)."""
    from gpuenv.tasks import find_task

    out: dict[str, dict] = {}
    policy: _Policy | Exception | None = None  # built once; an error building it is kept, not retried
    pool = action_pool(action_space, case.num_envs, case.action_pool_steps, case.seed)
    for name in phases["names"]:
        try:
            if name == "step":
                task = find_task(case.task)
                if task is None or not task.time_limit_only:
                    raise Absent(f"{case.task} ends episodes on a termination condition, so removing the time limit "
                                 "does not suppress resets")
                opener = getattr(adapter, "open_without_resets", None)
                if opener is None:
                    raise Absent(f"the {case.backend} adapter cannot suppress resets (no open_without_resets)")
                stepper = opener(case, native)
                stepper.load_actions(pool)
                how = stepper.facts.reset_mode
                chunk, run_settings, details = case.chunk_steps, settings, {}
            else:
                if policy is None:
                    try:
                        policy = _Policy(case, native, phases.get("ppo"))
                    except Exception as e:  # noqa: BLE001 - the same reason for every policy phase
                        policy = e
                if isinstance(policy, Exception):
                    raise policy
                details = policy.details
                if name in ("collect", "learn", "update"):
                    model = policy.model
                    stepper = {"collect": _Collect, "learn": _LearnOnly, "update": _Learn}[name](model)
                    chunk = model.n_steps
                    # the compile chunk and the calibration call are whole updates (or iterations) already
                    run_settings = replace(settings, warmups=0)
                    sizes = f"n_epochs={model.n_epochs}, batch_size={model.batch_size}"
                    how = {"collect": f"SB3 PPO.collect_rollouts: rollouts of n_steps={chunk} per env into the rollout buffer, "
                                      "advantages at each rollout's end, no update",
                           "learn": f"SB3 PPO's update alone ({sizes}) over one rollout of n_steps={chunk} x {case.num_envs} envs, "
                                    "again and again; rate = samples learned per second",
                           "update": f"SB3 PPO.learn: rollouts of n_steps={chunk} per env, each followed by its update ({sizes})"}[name]
                    how += f"; policy on {model.device.type}"
                else:
                    chunk, run_settings = case.chunk_steps, settings
                    if name == "vecenv":
                        stepper = _Steps(policy.venv, chunk, lambda _obs, i: pool[i % len(pool)], policy.sync)
                        how = f"random actions through {details.get('vectoriser', 'the backend VecEnv')} + SB3 VecMonitor" + (
                            " + VecNormalize" if details.get("normalize") else "")
                    else:
                        stepper = _Steps(policy.venv, chunk, _policy_act(policy), policy.sync)
                        how = f"the shared {details['policy']}'s forward pass per step (batch {case.num_envs}) on {policy.model.device.type}, sampled actions"
            try:
                m = measure_throughput(stepper, num_envs=case.num_envs, chunk_steps=chunk, settings=run_settings, clock=clock)
            finally:
                if name in ("step", "learn"):
                    stepper.close()  # step: its own env (processes, threads); learn: the policy it started from
            out[name] = {
                "env_steps_per_s": m.env_steps_per_s,
                "how": how,
                "chunk_steps": chunk,
                "loops": m.loops,
                "warmups": run_settings.warmups,
                "compile_s": m.compile_s,
                "details": details,
            }
        except Absent as e:
            out[name] = {"absent": str(e)}
        except Exception as e:  # a phase that breaks loses its own number only, never the case's
            out[name] = {"failed": first_line(e)}
        done(out)
    return out
