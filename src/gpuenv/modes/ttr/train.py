"""One PPO training run (one seed) in a worker process, for every trainer the same protocol.

- The clock starts before anything is imported or built; import, build, JAX compile and evaluation
  time are recorded apart, so time-to-threshold is reported with and without them.
- Evaluation is deterministic, on separate eval envs, every `eval_every_steps` env steps; the value
  is the mean return of `eval_episodes` complete episodes.
- A run stops at the first evaluation that reaches the threshold ("reached"), or at its step or
  wall-clock budget ("censored": the budget is the run's value, a lower bound, never dropped).
- A non-finite loss, parameter or return raises Diverged: the run is recorded as failed with the reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from gpuenv.backends.spec import NativeTask, resolve
from gpuenv.backends.training import EVAL_SEED_OFFSET, CompileClock, evaluate_and_record
from gpuenv.errors import Diverged
from gpuenv.modes.ttr.suite import PpoCase
from gpuenv.registry import default_registry


class Progress:
    """The run's clock and learning curve; trainers report evaluations here and obey its answer."""

    def __init__(self, case: PpoCase, seed: int, clock: Callable[[], float], t0: float, tb_dir: str | None,
                 native: NativeTask) -> None:
        self.case, self.seed, self.clock, self.t0, self.native = case, seed, clock, t0, native
        self.phases: dict[str, float] = {}
        self.compile_total: Callable[[], float] = lambda: 0.0
        self.curve: list[dict] = []
        self.eval_s = 0.0
        self.reached: dict | None = None
        self.stopped_by: str | None = None
        self.end_s: float | None = None
        self.next_eval = case.eval_every_steps
        self.steps_now = 0  # env steps trained so far, where the trainer reports them between evaluations
        self._last = (0, 0.0)  # (env steps, train seconds) at the previous evaluation, for fps
        self.tb = None
        self.tb_note = "not requested"
        self.sb3_last: dict[str, float] = {}  # SB3's own logged values, newest (the shared trainer's runs)
        self._pss_peak = 0  # the worker's process tree (training env processes included), at each evaluation
        if tb_dir:
            try:
                from tensorboardX import SummaryWriter

                self.tb = SummaryWriter(tb_dir)
                self.tb_note = tb_dir
            except ImportError:
                self.tb_note = "not written: tensorboardX is not installed"

    def phase(self, name: str, since: float) -> float:
        """Count the time from `since` to now as startup phase `name` (added up if it recurs)."""
        now = self.clock()
        self.phases[name] = self.phases.get(name, 0.0) + (now - since)
        return now

    @property
    def startup_s(self) -> float:
        return sum(self.phases.values())

    def wall(self, now: float | None = None) -> float:
        return (self.clock() if now is None else now) - self.t0

    def over_time(self) -> bool:
        if self.wall() >= self.case.max_time_s:
            self.stopped_by = "max_time_s"
            return True
        return False

    def record(self, env_steps: int, eval_return: float, eval_end: float, eval_s: float) -> bool:
        """One evaluation that ended at `eval_end` and took `eval_s` (compile inside it not included,
        since compile is counted on its own); returns True to keep training.

        Times are taken when the evaluation ends, the moment the run knows where it stands: wall_s
        counts everything since the clock started, train_s leaves out startup, all compile and all
        evaluation time up to that moment."""
        if not math.isfinite(eval_return):
            raise Diverged(f"evaluation return is {eval_return} at {env_steps} env steps")
        compile_s = self.compile_total()
        wall = eval_end - self.t0
        self.eval_s += eval_s
        train_s = wall - self.startup_s - compile_s - self.eval_s
        # Reading every process's smaps (after this evaluation's end) is the harness's time, not the
        # run's: the run's clock start moves on by it, so no later wall or train time includes it.
        t = self.clock()
        self.sample_memory()
        self.t0 += self.clock() - t
        steps0, train0 = self._last
        fps = (env_steps - steps0) / (train_s - train0) if train_s > train0 else None
        self._last = (env_steps, train_s)
        point = {
            "env_steps": int(env_steps),
            "wall_s": wall,
            "train_s": train_s,
            "eval_return": float(eval_return),
            "eval_s": eval_s,
            "compile_s": compile_s,
            "train_fps": fps,
        }
        self.curve.append(point)
        if self.tb is not None:
            # gpuenv's own scalars under gpuenv/: SB3's logger writes its time/fps and rollout/ep_rew_mean beside
            # them (sb3_tensorboard), and its fps counts evaluation time, which train_fps leaves out
            self.tb.add_scalar("gpuenv/eval_return", eval_return, env_steps)
            self.tb.add_scalar("gpuenv/wall_s", wall, env_steps)
            if fps is not None:
                self.tb.add_scalar("gpuenv/train_fps", fps, env_steps)
            self.tb.flush()
        self.next_eval = (env_steps // self.case.eval_every_steps + 1) * self.case.eval_every_steps
        if eval_return >= self.case.threshold and self.reached is None:
            self.reached = point
            self.stopped_by = "threshold"
            return False
        if env_steps >= self.case.max_env_steps:
            self.stopped_by = "max_env_steps"
            return False
        return not self.over_time()

    def sample_memory(self) -> None:
        import psutil

        from gpuenv.measure.monitor import tree_pss

        self._pss_peak = max(self._pss_peak, tree_pss(psutil.Process()))

    def memory(self) -> dict:
        """Host PSS peak of the process tree over the evaluations and the end of training; device memory
        from the libraries loaded (gpuenv.measure.monitor.memory)."""
        import psutil

        from gpuenv.measure.monitor import _Gpu, device_memory, memory, tree_pids

        self.sample_memory()
        gpu = _Gpu()
        return memory(self._pss_peak, gpu.method, device_memory(tree_pids(psutil.Process()), gpu.nvml_handle()))

    def result(self, details: dict) -> dict:
        mem = self.memory()  # before the end is read: not part of any timed value
        end = self.wall(self.end_s)
        last = self.curve[-1] if self.curve else {"env_steps": 0}
        compile_s = self.compile_total()
        if self.reached:
            p = self.reached
            value = {"time_to_threshold_s": p["wall_s"], "train_time_to_threshold_s": p["train_s"], "env_steps_to_threshold": p["env_steps"]}
        else:  # censored at what the run spent
            value = {
                "time_to_threshold_s": end,
                "train_time_to_threshold_s": end - self.startup_s - compile_s - self.eval_s,
                "env_steps_to_threshold": max(last["env_steps"], self.steps_now),
            }
        if self.tb is not None:
            self.tb.close()
        return {
            "ok": True,
            "seed": self.seed,
            "outcome": "reached" if self.reached else "censored",
            "stopped_by": self.stopped_by or "trainer finished its steps",
            **value,
            "best_eval_return": max((p["eval_return"] for p in self.curve), default=None),
            "wall_s": end,
            "startup_s": self.startup_s,
            "phases_s": dict(self.phases),
            "compile_s": compile_s,
            "eval_s": self.eval_s,
            "evaluations": len(self.curve),
            "curve": self.curve,
            "tensorboard": self.tb_note,
            # SB3's time/fps at its last log: env steps since learn() began / seconds since, evaluation included
            **({"sb3_time_fps": self.sb3_last["time/fps"]} if "time/fps" in self.sb3_last else {}),
            "memory": mem,
            "details": details,
        }


def run_training(spec: dict, clock: Callable[[], float] = time.perf_counter) -> dict:
    t0 = clock()
    case = PpoCase(**spec["case"])
    registry = default_registry()
    prog = Progress(case, int(spec["seed"]), clock, t0, spec.get("tb_dir"), registry.native(case.task, case.backend))
    # The harness's own setup, TensorBoard's writer (tensorboardX imports torch, about a second) among
    # it, is import time, not training time; the trainer adds its own imports to the same phase.
    prog.phase("import", t0)
    from gpuenv.modes.ttr.suite import trainers

    details = resolve(trainers(registry)[case.trainer][0].run)(case, prog)
    prog.end_s = prog.end_s if prog.end_s is not None else clock()
    return prog.result(details)


# --- SB3 ----------------------------------------------------------------------------------------


def _schedule(v):
    """rl-zoo style 'lin_0.001': linear decay from the value to 0 over the run."""
    if isinstance(v, str) and v.startswith("lin_"):
        start = float(v[4:])
        return lambda progress_remaining: progress_remaining * start
    return v


def sb3_kwargs(hp: dict) -> dict:
    import torch

    out = {k: _schedule(v) for k, v in hp.items() if k != "normalize"}
    pk = dict(out.get("policy_kwargs", {}))
    if "activation_fn" in pk:
        acts = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU}  # suite.ACTIVATIONS
        pk["activation_fn"] = acts[pk["activation_fn"]]
    if pk:
        out["policy_kwargs"] = pk
    return out


def policy_device(backend) -> str:
    """Where the shared policy runs: on the GPU for a GPU backend when this torch build has CUDA
    (a CPU torch build, or no GPU, trains on the CPU; the record says which)."""
    import torch

    return "cuda" if backend.device == "gpu" and torch.cuda.is_available() else "cpu"


def build_sb3(backend, variant: str, native: NativeTask, num_envs: int, seed: int, hyperparams: dict):
    """The shared PPO definition on a backend's batched env: its VecEnv wrapped as the trainer
    wraps it (VecMonitor, VecNormalize when asked) and SB3's PPO over it. -> (model, the wrapped
    VecEnv, details).
    The time-to-reward trainer and the throughput suite's policy phases both build it here."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.preprocessing import is_image_space
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

    from gpuenv.backends.served import vecenv_factory

    assert backend.ppo_env is not None
    venv, details = vecenv_factory(backend)(variant, native, num_envs, seed)
    venv = VecMonitor(venv)
    normalize = bool(hyperparams.get("normalize", False))
    if normalize:
        venv = VecNormalize(venv, gamma=hyperparams.get("gamma", 0.99))
    # Atari frames (uint8 images) get SB3's Nature CNN; anything else, MinAtar's 10x10x4 float planes
    # included (too small for its 8x8 stride-4 kernel), an MLP
    policy = "CnnPolicy" if is_image_space(venv.observation_space) else "MlpPolicy"
    device = policy_device(backend)
    model = PPO(policy, venv, seed=seed, device=device, verbose=0, **sb3_kwargs(hyperparams))
    # SB3's default logger (verbose=0) makes an empty tempdir/SB3-<time> folder at every learn() and
    # leaves it: a logger with no outputs writes nothing (gpuenv records what it needs itself)
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    details.update(policy=policy, normalize=normalize, policy_device=device)
    return model, venv, details


def sb3_tensorboard(writer, last: dict[str, float]):
    """SB3's logger writing what SB3 logs (time/fps, rollout/ep_rew_mean, train/..., at every PPO iteration, as
    `PPO(tensorboard_log=...)` writes them) into gpuenv's tensorboardX writer (None: nowhere): one event file
    per seed, no `tensorboard` package needed. `last` keeps each key's newest value (the record's)."""
    from stable_baselines3.common.logger import KVWriter, Logger

    class TensorBoardX(KVWriter):
        def write(self, key_values, key_excluded, step: int = 0) -> None:
            for key, value in key_values.items():
                excluded = key_excluded.get(key) or ()
                if "tensorboard" not in excluded and isinstance(value, (int, float, np.integer, np.floating)):
                    last[key] = float(value)
                    if writer is not None:
                        writer.add_scalar(key, float(value), step)
            if writer is not None:
                writer.flush()

        def close(self) -> None:  # gpuenv's Progress closes the writer
            pass

    return Logger(folder=None, output_formats=[TensorBoardX()])


def train_sb3(case: PpoCase, prog: Progress) -> dict:
    """The shared trainer, on the backend's declared PPO env (Backend.ppo_env)."""
    t = prog.clock()
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from gpuenv.backends.served import is_served, vecenv_factory

    backend = default_registry().get(case.backend)
    assert backend.ppo_env is not None  # the suite loader checked it
    if not is_served(backend):  # a served env imports its simulator in its own process, counted as build
        backend.load()  # the simulator's own imports count as import time
    make_vecenv = vecenv_factory(backend)
    t = prog.phase("import", t)
    native = prog.native
    model, venv, details = build_sb3(backend, case.variant, native, case.num_envs, prog.seed, case.hyperparams)
    model.set_logger(sb3_tensorboard(prog.tb, prog.sb3_last))
    eval_variant = backend.ppo_env.eval_variant or case.variant  # e.g. no extra processes for eval
    eval_env, _ = make_vecenv(eval_variant, native, case.eval_episodes, prog.seed + EVAL_SEED_OFFSET)
    normalize = details["normalize"]
    prog.phase("build", t)
    compile_clock: CompileClock | None = None
    if backend.ppo_env.jit_compiled:  # the env step is jit-compiled on first use: compile, not training
        import jax

        compile_clock = CompileClock(jax, prog.clock)
        prog.compile_total = compile_clock.total

    def evaluate() -> float:
        obs = eval_env.reset()
        n = eval_env.num_envs
        totals, finished = np.zeros(n), np.zeros(n, dtype=bool)
        while not finished.all():
            action, _ = model.predict(venv.normalize_obs(obs) if normalize else obs, deterministic=True)
            obs, reward, done, _ = eval_env.step(action)
            totals += np.where(finished, 0.0, reward)
            finished |= done
        return float(totals.mean())

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            prog.steps_now = self.num_timesteps
            if self.num_timesteps < prog.next_eval:
                return not prog.over_time()
            # compile inside the evaluation (the eval envs' first jitted step) is counted as compile, once
            return evaluate_and_record(prog, self.num_timesteps, self.model.policy.parameters(), evaluate,
                                       compile_clock.within if compile_clock else None)

    try:
        model.learn(total_timesteps=case.max_env_steps, callback=Evaluate())
    except ValueError as e:  # torch.distributions refuses NaN parameters
        if "nan" in str(e).lower():
            raise Diverged(f"NaN in the policy: {str(e).splitlines()[0]}") from None
        raise
    finally:
        prog.end_s = prog.clock()
        if is_served(backend):  # after the clock: an env process ends its simulator as it would (Genesis writes its kernel cache)
            venv.close()
            eval_env.close()
    details.update(
        trainer="stable_baselines3.PPO",
        stable_baselines3=stable_baselines3.__version__,
        torch=torch.__version__,
        torch_threads=torch.get_num_threads(),
        eval_vectoriser=eval_variant,
        eval_policy="deterministic",
    )
    return details
