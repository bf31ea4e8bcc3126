"""Published speed claims (claims/register.toml) checked against measured records.

Each claim states who claims what, the number and unit as stated, the hardware and protocol as
stated, and its source; its `check` table says what gpuenv measures for it:

- kind "rate": a backend's throughput on a task (closest num_envs), converted to the claim's unit
  (env steps/s, frames/s = env steps x the claim's frame_skip, physics steps/s);
- kind "ratio": one backend's rate over another's on the same task and num_envs (EnvPool "10x");
- kind "phase": the cost of a phase, the case's own rate over its rate through that phase
  (SB3's VecEnv wrapping "2-10x");
- kind "arithmetic": a derived statement (steps / rate = time), checked by arithmetic.

For each claim the check names the closest measured record, its value with its 95% interval and
machine, the ratio claimed / measured, and why they differ where that is known: the claim's own notes
(protocol) and what the records show (hardware class, num_envs, unit). Where a claim names a
protocol run (`protocol_backend`: gpuenv running the claim's own protocol, e.g. EnvPool's benchmark
settings), the check shows both, so protocol and hardware are told apart. A claim with no comparable
record says which run would check it.
"""

from gpuenv.claims.check import (
    Measured,
    Result,
    candidates,
    check_all,
    check_claim,
    closest,
    device_class,
    rate_in,
    record_path,
)
from gpuenv.claims.register import HARDWARE, KINDS, REGISTER, UNITS, Check, Claim, load_register, register_path
from gpuenv.claims.text import fmt, measured_line, text_report, with_unit

__all__ = ["HARDWARE", "KINDS", "REGISTER", "UNITS", "Check", "Claim", "Measured", "Result", "candidates", "check_all", "check_claim",
           "closest", "device_class", "fmt", "load_register", "measured_line", "rate_in", "record_path", "register_path",
           "text_report", "with_unit"]
