"""Verdicts a reader can act on, for many cases at once: regression / improvement / suspicious /
no detectable change / insufficient data (PyTorch HUD's labels), with the false alarms controlled
across the cases compared.

A case's evidence is a ratio NEW/OLD (B/A) with a 95% interval and a p-value of "no change". Across
cases the p-values are adjusted by Benjamini-Hochberg (false discovery rate 5%): a release tends to
move many cases of one backend together, and BH keeps its power there, where Holm's family-wise
control would need each case to clear alpha/m on its own; when nothing changed at all (an A/A run)
every discovery is false, and BH then bounds the chance of any false alarm at 5%, as Holm does.

  regression / improvement  significant after the adjustment AND beyond the threshold (practically
                            large), in the worse / better direction
  suspicious                one of the two without the other: beyond the threshold but not
                            significant (too noisy to tell: more blocks), or significant but smaller
                            than the threshold (a real change too small to act on)
  no detectable change      neither
  insufficient data         fewer than MIN_PAIRS complete pairs: how many more are needed is said
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuenv.measure import stats

REGRESSION, IMPROVEMENT, SUSPICIOUS = "regression", "improvement", "suspicious"
SAME, INSUFFICIENT = "no detectable change", "insufficient data"
LABELS = (REGRESSION, IMPROVEMENT, SUSPICIOUS, SAME, INSUFFICIENT)
MIN_PAIRS = 3  # a t interval from 2 pairs spans +-12.7 standard errors: no verdict from that
FDR = 0.05


@dataclass(frozen=True)
class Verdict:
    case_key: str
    unit: str  # of the quantity compared ("env steps/s")
    higher_is_better: bool
    a: float | None  # A's value (geometric mean over its paired processes)
    b: float | None
    pairs: int
    ratio: float | None  # B/A of the quantity
    ci_low: float | None
    ci_high: float | None
    p: float | None
    q: float | None  # the p-value adjusted across the cases compared (BH)
    label: str
    why: str  # what the label rests on, or what is missing
    sd_log: float | None = None  # pair-to-pair spread (log ratio) of this case on this machine

    @property
    def change(self) -> float | None:
        """Signed relative change, + = better (faster, or shorter time)."""
        if self.ratio is None:
            return None
        return self.ratio - 1 if self.higher_is_better else 1 / self.ratio - 1

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {**asdict(self), "change": self.change}


@dataclass(frozen=True)
class Evidence:
    """One case's paired values before the adjustment across cases."""

    case_key: str
    unit: str
    higher_is_better: bool
    a: list[float]  # values of the complete pairs, in block order
    b: list[float]
    missing: str = ""  # why pairs are missing ("2 of 8 blocks failed on B")


def label(change: float, significant: bool, threshold: float) -> str:
    """The label of a case whose evidence is complete: `change` signed, + = better."""
    large = abs(change) >= threshold
    if significant and large:
        return IMPROVEMENT if change > 0 else REGRESSION
    if significant or large:
        return SUSPICIOUS
    return SAME


def decide(evidence: list[Evidence], threshold: float, *, fdr: float = FDR) -> list[Verdict]:
    """A verdict per case, the p-values adjusted together over the cases with enough pairs."""
    tested = [(e, stats.paired(e.a, e.b)) for e in evidence if len(e.a) >= MIN_PAIRS]
    qs = dict(zip((e.case_key for e, _ in tested), stats.benjamini_hochberg([p.p for _, p in tested]), strict=True))
    out = []
    for e in evidence:
        if len(e.a) < MIN_PAIRS:
            more = MIN_PAIRS - len(e.a)
            why = f"{len(e.a)} complete pair(s), {MIN_PAIRS} needed ({more} more)" + (f"; {e.missing}" if e.missing else "")
            out.append(Verdict(e.case_key, e.unit, e.higher_is_better, _gmean(e.a), _gmean(e.b), len(e.a), None, None, None, None,
                               None, INSUFFICIENT, why))
            continue
        p = next(p for k, p in tested if k is e)
        q = qs[e.case_key]
        change = p.ratio - 1 if e.higher_is_better else 1 / p.ratio - 1
        lab = label(change, q <= fdr, threshold)
        why = _why(lab, change, q, threshold, fdr, p.n) + (f"; {e.missing}" if e.missing else "")
        out.append(Verdict(e.case_key, e.unit, e.higher_is_better, _gmean(e.a), _gmean(e.b), p.n, p.ratio, p.ci_low, p.ci_high,
                           p.p, q, lab, why, p.sd_log))
    return out


def _why(lab: str, change: float, q: float, threshold: float, fdr: float, n: int) -> str:
    text = f"{100 * change:+.1f}%, q={q:.2g}"
    if lab == SUSPICIOUS and q > fdr:
        text += f": beyond {100 * threshold:g}% but not significant (more blocks narrow it)"
    elif lab == SUSPICIOUS:
        text += f": significant but within {100 * threshold:g}%"
    return text


def _gmean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    return {lab: sum(v.label == lab for v in verdicts) for lab in LABELS}
