"""`gpuenv compare OLD NEW`: per case, NEW/OLD with a 95% interval and a verdict.

Throughput: ratio of median env steps/s (bootstrap over processes, then values, both sides).
Time-to-reward: ratio of the IQM wall-clock time to threshold (bootstrap over seeds); there higher
is worse. A verdict is "faster" or "slower" only when the whole interval is on one side of 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuenv.measure import stats
from gpuenv.results.schema import THROUGHPUT, TIME_TO_REWARD

FASTER, SLOWER, SAME = "faster", "slower", "no detectable change"


def _gpus(r: dict) -> str:
    return "; ".join(g.get("name", "?") for g in r["where"]["machine"].get("gpus", [])) or "none"


def _drivers(r: dict) -> str:
    return "; ".join(g.get("driver", "?") for g in r["where"]["machine"].get("gpus", [])) or "none"


# What must match for two runs to be comparable: (label, getter).
IDENTITY = (
    ("cpu", lambda r: r["where"]["machine"].get("cpu_model")),
    ("cpu cores", lambda r: r["where"]["machine"].get("cpu_logical")),
    ("gpus", _gpus),
    ("driver", _drivers),
    ("measurement mode", lambda r: r["measurement_mode"]),
)


def differences(old: list[dict], new: list[dict]) -> dict[str, tuple[str, str]]:
    out = {}
    for label, get in IDENTITY:
        a = sorted({str(get(r)) for r in old})
        b = sorted({str(get(r)) for r in new})
        if a != b:
            out[label] = (", ".join(a), ", ".join(b))
    return out


def version_changes(old: list[dict], new: list[dict]) -> dict[str, tuple[str | None, str | None]]:
    """Library versions that differ between the two sides (informational, never a refusal)."""
    a = old[0]["where"]["packages"]
    b = new[0]["where"]["packages"]
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@dataclass(frozen=True)
class Row:
    case_key: str
    mode: str
    old: float
    new: float
    ratio: float  # new / old of the headline number
    ci_low: float
    ci_high: float
    verdict: str
    change_pct: float  # signed, + = better (faster throughput or shorter time to reward)
    regressed: bool


def _groups(r: dict) -> list[list[float]]:
    return [p["env_steps_per_s"] for p in r["processes"] if p.get("env_steps_per_s")]


def _ttr_times(r: dict) -> np.ndarray:
    return np.array([x["time_to_threshold_s"] for x in r["runs"] if x["status"] != "failed"], dtype=float)


def _ttr_ratio(new: dict, old: dict, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    a, b = _ttr_times(new), _ttr_times(old)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [stats.iqm(a[rng.integers(0, a.size, a.size)]) / stats.iqm(b[rng.integers(0, b.size, b.size)]) for _ in range(n_boot)]
    )
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return stats.iqm(a) / stats.iqm(b), float(lo), float(hi)


def compare_case(old: dict, new: dict, threshold: float) -> Row:
    mode = new["measurement_mode"]
    if mode == THROUGHPUT:
        s = stats.ratio(_groups(new), _groups(old))
        ratio, lo, hi = s.median, s.ci_low, s.ci_high
        o, n = old["summary"]["env_steps_per_s"]["median"], new["summary"]["env_steps_per_s"]["median"]
        verdict = FASTER if lo > 1 else (SLOWER if hi < 1 else SAME)
        change = ratio - 1
    elif mode == TIME_TO_REWARD:
        ratio, lo, hi = _ttr_ratio(new, old)
        o, n = old["summary"]["time_to_threshold_s"]["iqm"], new["summary"]["time_to_threshold_s"]["iqm"]
        verdict = FASTER if hi < 1 else (SLOWER if lo > 1 else SAME)
        change = 1 / ratio - 1
    else:  # pragma: no cover - the schema admits no other mode
        raise ValueError(mode)
    regressed = verdict == SLOWER and -change > threshold
    return Row(new["case_key"], mode, o, n, ratio, lo, hi, verdict, change, regressed)


def match(old: list[dict], new: list[dict]) -> tuple[list[tuple[dict, dict]], list[str], list[str]]:
    """Pairs of ok records with the same case key; keys only in OLD; keys only in NEW. When a side has
    several records for a key (several runs), the latest counts."""
    def latest(records):
        out: dict[str, dict] = {}
        for r in sorted(records, key=lambda r: r["created_utc"]):
            if r["status"] == "ok":
                out[(r["measurement_mode"], r["case_key"])] = r
        return out

    a, b = latest(old), latest(new)
    pairs = [(a[k], b[k]) for k in a if k in b]
    return pairs, sorted(k[1] for k in a if k not in b), sorted(k[1] for k in b if k not in a)
