"""Plant a known slowdown in a copy of gpuenv, to prove that `gpuenv ab` finds one (test-only).

    python tools/plant_slowdown.py DEST --backend envpool --by 0.15 [--task cartpole] [--crash]

copies this checkout's src/ to DEST/src/ and patches the copy's throughput worker so that every
timed call of that backend's stepper (run and sync) is followed by a busy wait of the right share of
its own time: the backend's env-step rate falls to (1 - by) of what it is, on whatever machine, and
every other backend (and task, with --task) is untouched; --crash makes its stepping raise instead
(a release that broke the backend). `gpuenv ab . DEST` then compares the two.
Nothing in gpuenv itself knows of this: the patch exists only in DEST.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path("gpuenv/modes/throughput/worker.py")
ANCHOR = "    stepper.load_actions(action_pool("
PLANT = '''
class _Planted:
    """A stepper whose run and sync take 1 / (1 - BY) of their time (a planted slowdown)."""

    def __init__(self, inner, by):
        self._inner, self._pad = inner, None if by is None else 1 / (1 - by) - 1

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _padded(self, call, *args):
        if self._pad is None:
            raise RuntimeError("planted crash (tools/plant_slowdown.py --crash)")
        t0 = time.perf_counter()
        out = call(*args)
        end = time.perf_counter() + (time.perf_counter() - t0) * self._pad
        while time.perf_counter() < end:
            pass
        return out

    def run(self, loops):
        return self._padded(self._inner.run, loops)

    def sync(self):
        return self._padded(self._inner.sync)


def _plant(stepper, case):
    if case.backend == {backend!r} and {task!r} in (None, case.task):
        return _Planted(stepper, {by!r})
    return stepper
'''


def plant(dest: Path, backend: str, by: float | None, task: str | None = None, src: Path = ROOT / "src") -> Path:
    """by=None: a crash instead of a slowdown."""
    if by is not None and not 0 < by < 1:
        raise ValueError("--by is a fraction in (0, 1): 0.15 makes the rate 0.85x")
    shutil.copytree(src, dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"), dirs_exist_ok=True)
    worker = dest / "src" / WORKER
    text = worker.read_text()
    if ANCHOR not in text or "import time" not in text:
        raise SystemExit(f"{worker}: the planting point ({ANCHOR.strip()!r}) is gone; update tools/plant_slowdown.py")
    text = text.replace(ANCHOR, "    stepper = _plant(stepper, case)  # PLANTED by tools/plant_slowdown.py\n" + ANCHOR, 1)
    worker.write_text(text + PLANT.format(backend=backend, task=task, by=by))
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dest", type=Path)
    p.add_argument("--backend", required=True)
    p.add_argument("--by", type=float, default=0.15)
    p.add_argument("--task")
    p.add_argument("--crash", action="store_true", help="its stepping raises instead")
    a = p.parse_args(argv)
    plant(a.dest, a.backend, None if a.crash else a.by, a.task)
    what = "a crash" if a.crash else f"{100 * a.by:g}% slower"
    print(f"{a.dest}: {a.backend}{' ' + a.task if a.task else ''} planted: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
