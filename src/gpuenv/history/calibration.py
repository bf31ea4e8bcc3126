"""This machine's own run-to-run noise, from A/A runs of `gpuenv ab` (the same code on both sides).

An A/A case runs 2 x blocks worker processes spread over its minutes; the spread of their values
(log scale, around each side's mean) is how much one process's number moves on this machine while
nothing changes. Two stored runs measured apart (`gpuenv compare`) see at least that: a difference
inside NOISE_SDS of it is "within this machine's run-to-run noise", never "slower". Calibrations are
keyed by machine identity (CPU model and cores, GPUs) and case key; the latest A/A counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuenv.results.schema import Record

NOISE_SDS = 2.0  # allowance: this many standard deviations of the difference of two runs


@dataclass(frozen=True)
class Noise:
    sd_log: float  # standard deviation of one process's log value while nothing changes
    processes: int
    ab_id: str
    when: str  # created_utc of the A/A's record

    @property
    def allowance(self) -> float:
        """The relative change (log scale) two stored runs of the same code stay within, about 95% of
        the time: NOISE_SDS standard deviations of the difference of two such values."""
        return NOISE_SDS * math.sqrt(2) * self.sd_log


def key(record: Record) -> tuple[str, str]:
    from gpuenv.measure.fingerprint import identity

    return identity(record), record.case_key


def calibrate(records: list[Record]) -> dict[tuple[str, str], Noise]:
    """(machine identity, case key) -> its noise, from the A/A records among `records`."""
    from gpuenv.history.ab import pairs_of
    from gpuenv.modes import of

    out: dict[tuple[str, str], Noise] = {}
    for ab_id, pairs in sorted(pairs_of(records).items(), key=lambda kv: min(r.created_utc for p in kv[1] for r in p)):
        for a, b in pairs:
            if a.status != "ok" or b.status != "ok" or a.tags.get("side_label") != b.tags.get("side_label"):
                continue  # not an A/A: the two sides ran different code
            devs: list[float] = []
            for r in (a, b):
                logs = [math.log(v) for v in of(r).process_values(r).values()]
                if len(logs) >= 2:
                    mean = sum(logs) / len(logs)
                    devs += [x - mean for x in logs]
            dof = len(devs) - 2
            if dof < 2:
                continue
            sd = math.sqrt(sum(d * d for d in devs) / dof)
            out[key(b)] = Noise(sd, len(devs), ab_id, b.created_utc)
    return out
