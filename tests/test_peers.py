"""`gpuenv peers`: gpuenv's physics steps/s beside the frameworks' own benchmarks (mjx.benchmark,
brax.test_utils.benchmark) at matched settings. What is asserted holds at any speed: every side and
the peer ran, in physics steps/s, with the settings and the physics steps per env step the backend ran;
the ratios themselves are measurements (docs/measuring.md has them), never asserted."""

from __future__ import annotations

import json

import pytest

from gpuenv.run import peers

pytestmark = pytest.mark.backend


def test_a_backend_without_a_peer_or_a_bad_size_is_one_line_and_exit_2(cli, tmp_path):
    for args, said in [(("--peer", "gymnasium"), "gymnasium has no peer benchmark in gpuenv (backends with one: brax, mjx)"),
                       (("--peer", "mjx:nope"), "unknown variant 'nope' of backend 'mjx'"),
                       (("--peer", "mjx", "--num-envs", "0"), "--rounds, --num-envs and --min-time must be positive")]:
        r = cli("peers", *args, "--out", str(tmp_path))
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not list(tmp_path.iterdir())  # nothing measured, nothing written


def test_peers_measure_every_side_and_the_peer_in_physics_steps(cli, tmp_path):
    """Every side (as it runs, zero actions, no resets) beside the peer, on Brax's positional pipeline (the
    one backend with all three). Both peers at once, --plain, are gpu-check's step (tests/test_gpucheck.py:
    MJX's row, its solver settings and its 5 physics steps per env step are asserted there); a second run
    of both here cost 200 s of CI (issue 48's budget)."""
    r = cli("peers", "--peer", "brax:positional", "-n", "4", "--rounds", "1", "--min-time", "0.05", "--out", str(tmp_path), timeout=900)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (path,) = tmp_path.glob("peers-*.jsonl")
    where, *rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert where["where"]["machine"] and len(rows) == 1
    (brax,) = rows
    assert (brax["selector"], brax["physics_steps_per_env_step"]) == ("brax:positional", 16)  # Brax's own n_frames, not frame_skip 5
    assert brax["peer"].startswith("brax.test_utils.benchmark")
    assert set(brax["physics_steps_per_s"]) == {*peers.SIDES, "peer"}
    assert all(v > 0 for vs in brax["physics_steps_per_s"].values() for v in vs) and len(brax["physics_steps_per_s"]["peer"]) == 3
    med = {k: sorted(v)[len(v) // 2] for k, v in brax["physics_steps_per_s"].items()}  # 3 values a side: odd
    assert brax["ratio"]["gpuenv"] == pytest.approx(med["gpuenv"] / med["peer"])  # medians, not means
    assert brax["ratio"]["gpuenv_no_resets"] == pytest.approx(med["gpuenv_no_resets"] / med["peer"])
    assert "brax:positional halfcheetah n=4 on cpu: physics steps/s gpuenv" in r.stdout
