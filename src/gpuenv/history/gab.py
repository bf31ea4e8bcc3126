"""pytest-benchmark JSON -> github-action-benchmark `customBiggerIsBetter` JSON (env steps/s)."""

from __future__ import annotations

import json
from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.inputs import read_regular


def convert(data: dict) -> list[dict]:
    out = []
    for b in data.get("benchmarks", []):
        info = b.get("extra_info", {})
        if "env_steps_per_s" not in info:
            continue
        steps, st = info["env_steps_per_round"], b["stats"]
        out.append(
            {
                "name": info.get("case", b["name"]),
                "unit": "env steps/s",
                "value": round(info["env_steps_per_s"], 1),
                # slowest and fastest round, as rates
                "range": f"{steps / st['max']:.0f}-{steps / st['min']:.0f}",
                "extra": f"median of {st['rounds']} rounds; machine {data.get('machine_info', {}).get('cpu', {}).get('brand_raw', '?')}",
            }
        )
    return out


def export(src: Path, dst: Path) -> int:
    try:
        data = json.loads(read_regular(Path(src), f"{src}: not a pytest-benchmark JSON file"))
    except (ValueError, RecursionError) as e:
        raise UserError(f"{src}: not a pytest-benchmark JSON file ({str(e)[:80] or 'nested too deep'})") from None
    try:
        rows = convert(data)
    except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise UserError(f"{src}: not a pytest-benchmark JSON file of gpuenv's ({type(e).__name__}: {str(e)[:80]})") from None
    if not rows:
        raise UserError(f"{src}: no gpuenv benchmarks with env_steps_per_s in it (run `make bench-pytest`)")
    Path(dst).write_text(json.dumps(rows, indent=2) + "\n")
    return len(rows)
