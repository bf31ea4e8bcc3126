"""`gpuenv compare OLD NEW`: per case, NEW/OLD of the mode's headline with a 95% interval and a verdict.

Each measurement mode gives the ratio and its interval (throughput: median env steps/s, bootstrap
over processes then values; time-to-reward: IQM wall-clock to threshold, bootstrap over seeds) and
whether higher is better. A verdict is "faster" or "slower" only when the whole interval is on one
side of 1, and only when the change is larger than this machine's run-to-run noise: two runs of
the same code measured apart differ by the machine's drift, which intervals from one run do not
see. The allowance is the A/A calibration of the case on this machine (gpuenv.history.calibration,
from `gpuenv ab X X`) combined with the change of the machine's reference speed between the two
records (their fingerprints); a change inside it is "within this machine's run-to-run noise". Runs
of different hardware (CPU model, cores, GPUs, driver) are refused; different speeds are not, they
widen the allowance. Memory peaks (host, device: one per worker process or seed) are compared the same way,
lower is better, verdict "less memory" / "more memory". Records pair up by `workload_id` (same case, measurement settings and physics facts);
`by="case"` pairs by case key instead, for a deliberate comparison across workloads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuenv.measure.fingerprint import runs_line
from gpuenv.modes import of
from gpuenv.results.schema import Record

FASTER, SLOWER, SAME = "faster", "slower", "no detectable change"
NOISE = "within this machine's run-to-run noise"
MEMORY_NOISE = 0.02  # a memory peak that moved less than this is no change (PSS of identical runs moves ~0.1%)
LESS, MORE = "less memory", "more memory"


def _gpus(r: Record) -> str:
    return "; ".join(g.name for g in r.where.machine.gpus) or "none"


def _drivers(r: Record) -> str:
    return "; ".join(g.driver for g in r.where.machine.gpus) or "none"


# What must match for two runs to be comparable: (label, getter).
IDENTITY = (
    ("cpu", lambda r: r.where.machine.cpu_model),
    ("cpu cores", lambda r: r.where.machine.cpu_logical),
    ("gpus", _gpus),
    ("driver", _drivers),
)


def differences(old: list[Record], new: list[Record]) -> dict[str, tuple[str, str]]:
    out = {}
    for label, get in IDENTITY:
        a = sorted({str(get(r)) for r in old})
        b = sorted({str(get(r)) for r in new})
        if a != b:
            out[label] = (", ".join(a), ", ".join(b))
    return out


def speed_differences(pairs: list[tuple[Record, Record]]) -> tuple[list[tuple[str, str]], int]:
    """(case key, why) for each OLD/NEW pair whose machine-speed fingerprints are beyond their noise
    apart, and how many pairs lack a fingerprint on either side (records older than the fingerprint)."""
    from gpuenv.measure.fingerprint import differs
    from gpuenv.measure.fingerprint import of as fingerprint_of

    apart, missing = [], 0
    for a, b in pairs:
        fa, fb = fingerprint_of(a), fingerprint_of(b)
        if fa is None or fb is None:
            missing += 1
        elif why := differs(fa, fb):
            apart.append((b.case_key, why))
    return apart, missing


def version_changes(old: list[Record], new: list[Record]) -> dict[str, tuple[str | None, str | None]]:
    """Library versions that differ between the two sides (informational, never a refusal)."""
    a = old[0].where.packages
    b = new[0].where.packages
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@dataclass(frozen=True)
class Row:
    case_key: str
    unit: str  # of the headline
    old: float
    new: float
    ratio: float  # new / old of the headline number
    ci_low: float
    ci_high: float
    verdict: str
    change_pct: float  # signed, + = better (faster throughput or shorter time to reward)
    regressed: bool
    allowance: float = 0.0  # the run-to-run noise allowed (relative, log scale) before a verdict


def compare_case(old: Record, new: Record, threshold: float, allowance: float = 0.0) -> Row:
    """NEW/OLD of the headline; a change inside `allowance` (log scale) is NOISE, not a verdict."""
    mode = of(new)
    ratio, lo, hi = mode.ratio(new, old)
    o, n = mode.headline(old).value, mode.headline(new).value
    if mode.headline(new).higher_is_better:
        verdict = FASTER if lo > 1 else (SLOWER if hi < 1 else SAME)
        change = ratio - 1
    else:
        verdict = FASTER if hi < 1 else (SLOWER if lo > 1 else SAME)
        change = 1 / ratio - 1
    if verdict != SAME and abs(math.log(ratio)) <= allowance:
        verdict = NOISE
    regressed = verdict == SLOWER and -change > threshold
    return Row(new.case_key, mode.headline(new).unit, o, n, ratio, lo, hi, verdict, change, regressed, allowance)


def drift(old: Record, new: Record) -> float:
    """How far the machine's reference speed (pure-Python loop) moved between two records, log scale;
    0 where either has no fingerprint."""
    from gpuenv.measure.fingerprint import of as fingerprint_of

    a, b = fingerprint_of(old), fingerprint_of(new)
    return abs(math.log(b.python_mops.median / a.python_mops.median)) if a and b else 0.0


def memory_rows(old: Record, new: Record, threshold: float) -> list[Row]:
    """NEW/OLD of each memory peak both records measured, median over workers with a bootstrap
    interval; more memory by more than `threshold` is a regression, like a slowdown."""
    from gpuenv.measure import stats
    from gpuenv.modes.base import MEMORY_METRICS

    mode, rows = of(new), []
    for metric in MEMORY_METRICS:
        a, b = mode.memory_values(old, metric), mode.memory_values(new, metric)
        if not a or not b:
            continue
        r = stats.ratio([[v] for v in b], [[v] for v in a])
        # one worker a side has no spread to tell a change from noise: no verdict then; nor below
        # MEMORY_NOISE, where page accounting moves between identical runs (0.1% here) with tight intervals
        verdict = SAME if min(len(a), len(b)) < 2 or abs(r.median - 1) < MEMORY_NOISE else (
            LESS if r.ci_high < 1 else (MORE if r.ci_low > 1 else SAME))
        change = 1 / r.median - 1  # + = better (less memory)
        regressed = verdict == MORE and r.median - 1 > threshold
        o, n = float(stats.upper_median(a) or 0.0), float(stats.upper_median(b) or 0.0)
        rows.append(Row(new.case_key, f"{metric.name} {metric.unit}", o, n, r.median, r.ci_low, r.ci_high, verdict, change, regressed))
    return rows


def match_key(r: Record, by: str = "workload") -> tuple[str, str]:
    return (r.measurement_mode, r.workload_id if by == "workload" else r.case_key)


def match(old: list[Record], new: list[Record], by: str = "workload") -> tuple[list[tuple[Record, Record]], list[str], list[str]]:
    """Pairs of ok records of the same workload (or case key); case keys only in OLD; only in NEW (a
    key on both sides with different workloads is on both lists, marked). When a side has several
    records of one workload (several runs), the latest counts."""
    def latest(records: list[Record]) -> dict[tuple[str, str], Record]:
        out: dict[tuple[str, str], Record] = {}
        for r in sorted(records, key=lambda r: r.created_utc):
            if r.status == "ok":
                out[match_key(r, by)] = r
        return out

    a, b = latest(old), latest(new)
    pairs = [(a[k], b[k]) for k in a if k in b]
    keys_a = {r.case_key for r in a.values()}
    keys_b = {r.case_key for r in b.values()}
    only_a = sorted({_lonely(r, keys_b) for k, r in a.items() if k not in b})
    only_b = sorted({_lonely(r, keys_a) for k, r in b.items() if k not in a})
    return pairs, only_a, only_b


def _lonely(r: Record, other_keys: set[str]) -> str:
    if r.case_key in other_keys:
        return f"{r.case_key} (same case key, different workload: measurement settings or physics differ; --by-case compares anyway)"
    return r.case_key


@dataclass
class Comparison:
    """`gpuenv compare`: NEW/OLD per paired record (speed rows, memory rows) and what the pairing left
    out or was forced across."""

    rows: list  # Row per paired case: the headline
    mem_rows: list  # Row per paired case and memory metric
    threshold: float
    differs: dict  # fields the runs differ in (machine identity), when compared anyway
    apart: list  # (case, why) pairs measured at different machine speeds, when compared anyway
    no_fingerprint: int  # pairs with no fingerprint on one side
    only_old: list
    only_new: list
    versions: dict  # package -> (old, new)
    calibrated: dict = field(default_factory=dict)  # case key -> its A/A calibration (calibration.Noise)
    uncalibrated: list = field(default_factory=list)  # case keys compared without one
    old_side: str = ""  # OLD's runs, when and on which machine (fingerprint.runs_line)
    new_side: str = ""

    @property
    def regressed(self) -> list:
        return [r for r in self.rows if r.regressed]

    def to_dict(self) -> dict:
        """Everything the table and its notes say, for `compare --json`."""
        from dataclasses import asdict

        return {"old": self.old_side, "new": self.new_side, "rows": [asdict(r) for r in self.rows], "memory": [asdict(r) for r in self.mem_rows], "threshold": self.threshold,
                "hardware_differs": {k: list(v) for k, v in self.differs.items()},
                "speed_moved": [{"case": k, "why": w} for k, w in self.apart], "no_fingerprint": self.no_fingerprint,
                "only_old": self.only_old, "only_new": self.only_new, "versions": {k: list(v) for k, v in self.versions.items()},
                "calibrated": {k: {"sd_log": n.sd_log, "allowance": n.allowance, "ab": n.ab_id} for k, n in self.calibrated.items()},
                "uncalibrated": self.uncalibrated, "regressed": [r.case_key for r in self.regressed],
                "memory_regressed": [r.case_key for r in self.mem_regressed]}

    @property
    def mem_regressed(self) -> list:
        return [r for r in self.mem_rows if r.regressed]


def check_threshold(threshold: float) -> float:
    from gpuenv.errors import UserError

    if not 0 <= threshold < 1:
        raise UserError(f"--threshold must be a fraction in [0, 1) (got {threshold}); 0.1 means 10%")
    return threshold


def read_sides(old: list[str], new: str) -> tuple[list[Record], list[Record], list[str]]:
    """(OLD records, NEW records, one line per file skipped) for compare_runs."""
    from gpuenv.history.load import load_records

    old_recs, p1 = load_records(old, "OLD records")
    new_recs, p2 = load_records([new], "NEW records")
    return old_recs, new_recs, p1 + p2


def read_calibration(paths: list[str] | None) -> tuple[list[Record], list[str]]:
    """Records of `gpuenv ab` runs under `paths` (default results/ab, where it writes; nothing when that
    folder does not exist), and one line per file skipped."""
    from pathlib import Path

    from gpuenv.errors import UserError
    from gpuenv.history.load import load_records

    if paths is None:  # the default place: nothing there is no error
        try:
            records, problems = load_records(["results/ab"], "A/A calibration records") if Path("results/ab").is_dir() else ([], [])
        except UserError:
            return [], []
    else:
        records, problems = load_records(paths, "A/A calibration records")
    return [r for r in records if r.tags.get("ab")], problems


def compare_runs(old_recs: list[Record], new_recs: list[Record], threshold: float = 0.10, *, allow_different: bool = False,
                 by_case: bool = False, calibration: list[Record] | None = None) -> Comparison:
    """Pair OLD's and NEW's records (by workload, or by case key) and compare each pair, allowing for
    this machine's noise (A/A records among `calibration`) and its speed change; UserError where the
    runs are not comparable (other hardware) unless allowed."""
    from gpuenv.errors import UserError
    from gpuenv.history import calibration as cal

    check_threshold(threshold)
    diff = differences(old_recs, new_recs)
    if diff and not allow_different:
        fields = "; ".join(f"{k}: {a} vs {b}" for k, a, b in ((k, *v) for k, v in diff.items()))
        raise UserError(f"the runs differ in {fields}; such runs are not comparable (--allow-different compares anyway)")
    pairs, only_old, only_new = match(old_recs, new_recs, by="case" if by_case else "workload")
    if not pairs:
        raise UserError(
            "OLD and NEW have no ok record of the same workload in common (compare runs of the same suite; "
            "--by-case pairs by case key across measurement settings)"
        )
    apart, no_fingerprint = speed_differences(pairs)
    noise = cal.calibrate(calibration or [])
    found = {b.case_key: noise[cal.key(b)] for _, b in pairs if cal.key(b) in noise}

    def allowance(a: Record, b: Record) -> float:
        own = found[b.case_key].allowance if b.case_key in found else 0.0
        return math.hypot(own, drift(a, b))

    return Comparison(
        rows=[compare_case(a, b, threshold, allowance(a, b)) for a, b in pairs],
        mem_rows=[m for a, b in pairs for m in memory_rows(a, b, threshold)],
        threshold=threshold, differs=diff, apart=apart, no_fingerprint=no_fingerprint, only_old=only_old, only_new=only_new,
        versions=version_changes(old_recs, new_recs), calibrated=found,
        uncalibrated=sorted({b.case_key for _, b in pairs} - set(found)),
        old_side=runs_line(old_recs), new_side=runs_line(new_recs),
    )
