"""PufferLib's own trainer on Ocean: `pufferlib.pufferl.PuffeRL` (PufferLib 3.0's PPO with V-trace
style advantage clipping and prioritised minibatches, its C++ advantage kernel `pufferlib._C`, the
Muon optimizer from heavyball) with PufferLib's shipped config for the env (`config/ocean/*.ini` over
`config/default.ini`), run the way `puffer train` runs it: `evaluate()` collects one batch, `train()`
learns from it, until the step budget. Runs in Ocean's own environment.

What gpuenv sets (the rest is PufferLib's config as shipped; the record holds its [train] section as it ran):
  - the device (cpu here: a GPU machine's CUDA torch is not in Ocean's environment), the env count
    (the case's num_envs, in one PufferEnv, wrapped in pufferlib.vector.Serial as `puffer train
    --vec.backend Serial` does), the seed, total_timesteps (the case's step budget: its cosine
    learning-rate schedule spans the budget, as Brax's PPO does)
  - the suite's hyperparameters, over PufferLib's [train] section
  - no dashboard (PufferLib redraws its terminal dashboard every 0.25 s) and no checkpoints
  - the harness's evaluation: deterministic (argmax) actions on separate envs, one complete episode
    each, every `eval_every_steps` env steps, timed apart from training. PufferLib's own score is the
    stochastic policy's training episodes; the record keeps that too."""

from __future__ import annotations

import sys
from importlib.metadata import version
from typing import Any

import numpy as np

from gpuenv.backends.ocean.adapter import episode_ends, make_env, own_random_state
from gpuenv.backends.training import EVAL_SEED_OFFSET, evaluate_and_record
from gpuenv.errors import UserError

# PufferLib's config name of each Ocean task (the [base] env_name of its .ini)
CONFIG = {"pufferlib.ocean.breakout.breakout:Breakout": "puffer_breakout", "pufferlib.ocean.cartpole.cartpole:Cartpole": "puffer_cartpole"}


def check_values(hp: dict, where: str) -> None:
    """Values pufferl would otherwise reject one seed at a time, with a traceback (run where the suite loads)."""
    for k, v in hp.items():
        if k == "optimizer":
            ok = v in ("adam", "muon")
            want = "'adam' or 'muon'"
        elif k == "anneal_lr":
            ok, want = isinstance(v, bool), "true or false"
        elif k in ("update_epochs", "bptt_horizon", "minibatch_size", "max_minibatch_size"):
            ok, want = isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"
        else:
            ok, want = isinstance(v, (int, float)) and not isinstance(v, bool), "a number"
        if not ok:
            raise UserError(f"{where}: {k} = {v!r}: pufferl takes {want}")


def config(pufferl: Any, env_name: str) -> dict[str, Any]:
    """PufferLib's config for the env, as `puffer train <env_name>` reads it with no arguments (pufferl: the
    module, from _import_pufferl)."""
    argv = sys.argv
    sys.argv = [argv[0]]  # its parser reads the command line: the worker's is not PufferLib's
    try:
        return pufferl.load_config(env_name)
    finally:
        sys.argv = argv


def _import_pufferl() -> Any:
    """pufferlib.pufferl, leaving the process as it was: its import turns every numpy RuntimeWarning into
    an error and makes Ctrl-C exit at once with status 0 (os._exit), for its command line."""
    import signal
    import warnings

    sigint = signal.getsignal(signal.SIGINT)
    with warnings.catch_warnings():
        from pufferlib import pufferl
    signal.signal(signal.SIGINT, sigint)
    return pufferl


def train(case, prog) -> dict:  # prog: gpuenv.modes.ttr.train.Progress
    t = prog.clock()
    import random

    import pufferlib
    import torch

    pufferl = _import_pufferl()
    t = prog.phase("import", t)
    native = prog.native
    env_name = CONFIG[native.env_id]
    args = config(pufferl, env_name)
    for key, value in case.hyperparams.items():
        args["train"][key] = value
    args["train"].update(device="cpu", seed=prog.seed, total_timesteps=case.max_env_steps, compile=False)
    args["env"]["num_envs"] = case.num_envs
    if "frameskip" in args["env"]:  # the catalogue's frames per step (PufferLib's own for Breakout)
        args["env"]["frameskip"] = native.frame_skip
    args["vec"] = {"backend": "Serial", "num_envs": 1}
    tr = args["train"]
    batch = case.num_envs * tr["bptt_horizon"] if tr["batch_size"] == "auto" else tr["batch_size"]
    if isinstance(batch, int) and batch > case.max_env_steps:  # PufferLib would divide by its 0 epochs
        raise UserError(f"pufferl's batch of {batch:,} env steps ({case.num_envs} envs x bptt_horizon {tr['bptt_horizon']}) "
                        f"is larger than the budget, max_env_steps {case.max_env_steps:,}: use fewer envs or a larger budget")
    random.seed(prog.seed)
    np.random.seed(prog.seed)
    torch.manual_seed(prog.seed)
    vecenv = pufferl.load_env(env_name, args)
    policy = pufferl.load_policy(args, vecenv)
    try:
        trainer = _quiet_class(pufferl)(dict(**tr, env=env_name), vecenv, policy)
    except pufferlib.APIUsageError as e:  # sizes that do not fit the env count
        raise UserError(f"pufferl refuses these settings: {e} ({case.num_envs} envs)") from None
    eval_seed = prog.seed + EVAL_SEED_OFFSET
    with own_random_state(eval_seed):  # the eval envs leave the training envs' random draws alone
        eval_env, _ = make_env(native, case.eval_episodes, eval_seed)
    prog.phase("build", t)

    def evaluate() -> float:
        n = case.eval_episodes
        totals, finished = np.zeros(n), np.zeros(n, dtype=bool)
        state: dict[str, Any] = {"lstm_h": None, "lstm_c": None} if tr["use_rnn"] else {}
        with own_random_state(eval_seed), torch.no_grad():
            obs, _ = eval_env.reset(seed=eval_seed)
            while not finished.all():
                logits, _ = policy.forward_eval(torch.as_tensor(obs), state)
                obs, reward, terminal, truncated, _ = eval_env.step(logits.argmax(dim=-1).numpy())
                totals += np.where(finished, 0.0, reward)
                finished |= episode_ends(native, reward, terminal, truncated)[0]
        return float(totals.mean())

    score = None
    try:
        while trainer.global_step < case.max_env_steps:
            trainer.evaluate()
            score = trainer.stats.get("score", score)  # before train() logs and clears them (at most every 0.25 s)
            trainer.train()
            prog.steps_now = trainer.global_step
            if trainer.global_step < prog.next_eval:
                if prog.over_time():
                    break
                continue
            if not evaluate_and_record(prog, trainer.global_step, policy.parameters(), evaluate):
                break
    finally:
        prog.end_s = prog.clock()
        trainer.utilization.stop()
        vecenv.close()
        eval_env.close()
    return {
        "trainer": "pufferlib.pufferl.PuffeRL (PufferLib's own PPO, as `puffer train` runs it)",
        "pufferlib": version("pufferlib"),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": "cpu",
        "pufferlib_config": f"{env_name}: PufferLib's config/default.ini and its env's .ini, the suite's settings over [train]",
        "train_config": {k: v for k, v in trainer.config.items() if isinstance(v, (int, float, str, bool)) or v is None},
        "policy": f"{args['policy_name']}{' + ' + args['rnn_name'] if args['rnn_name'] else ''} "
                  f"({trainer.model_size:,} parameters), policy {args['policy']}, rnn {args['rnn']}",
        "vectorization": f"pufferlib.vector.Serial over one PufferEnv of {case.num_envs} envs, in this process",
        "env_kwargs": args["env"],
        "eval_policy": "deterministic (argmax of the policy's logits, LSTM state from zero)",
        "eval_envs": f"a separate PufferEnv of {case.eval_episodes} envs, one complete episode each, drawing from a C random "
                     "state of its own",
        "pufferlib_score_last": float(np.mean(score)) if score is not None and np.size(score) else None,
        "pufferlib_score": "PufferLib's own 'score' stat (Breakout: points; CartPole: episode length, up to 200) at the end of "
                           "training: the mean over the stochastic policy's training episodes finished since PufferLib's last "
                           "log (it logs at most every 0.25 s)",
        "dashboard": "off (PufferLib's terminal dashboard redraws every 0.25 s)",
        "checkpoints": "none written",
    }


def _quiet_class(pufferl: Any) -> Any:
    class Quiet(pufferl.PuffeRL):
        """PuffeRL without its terminal dashboard and checkpoints; training is PufferLib's, unchanged."""

        def print_dashboard(self, *args: Any, **kwargs: Any) -> None:
            pass

        def save_checkpoint(self) -> None:  # train() saves every checkpoint_interval epochs into ./experiments
            return None

    return Quiet
