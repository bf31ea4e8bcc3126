"""The claims register (claims/register.toml, or GPUENV_CLAIMS): one strict pydantic model per claim
and check, each mistake one line naming the file, the claim and the key."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gpuenv import inputs
from gpuenv.errors import UserError
from gpuenv.results.schema import quote as schema_quote

ROOT = Path(__file__).resolve().parents[3]
REGISTER = ROOT / "claims" / "register.toml"
UNITS = ("env steps/s", "frames/s", "physics steps/s", "x", "s")
KINDS = ("rate", "ratio", "training-ratio", "phase", "arithmetic")
HARDWARE = ("cpu", "gpu", "tpu", "unstated")

_TEXT = {"id", "who", "stated", "unit", "hardware", "hardware_class", "protocol", "source", "backend", "task", "numerator",
         "denominator", "phase", "protocol_backend", "suite"}
_POSITIVE = {"value", "value_low", "value_high", "steps", "rate", "num_envs", "frame_skip"}
_WHOLE = {"num_envs", "frame_skip"}
_NEEDS = {"rate": ("backend", "task"), "ratio": ("numerator", "denominator", "task"), "phase": ("backend", "task", "phase"),
          "training-ratio": ("numerator", "denominator", "task", "suite"),
          "arithmetic": ("steps", "rate")}
_CHOICES = {"unit": UNITS, "hardware_class": HARDWARE, "kind": KINDS}


class _Strict(BaseModel):
    """A register table: unknown keys refused; every value checked for what it is before use, each
    mistake one message naming the key (load_register prefixes the file and the claim)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _kind_of_value(cls, v: Any, info: ValidationInfo) -> Any:
        k = info.field_name or ""
        where = f"check.{k}" if cls is Check and k in _WHOLE else k
        if k in _TEXT and not isinstance(v, str):
            raise PydanticCustomError("text", "{k} must be text (got {v})", {"k": k, "v": schema_quote(v)})
        if k in _POSITIVE and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0):
            raise PydanticCustomError("positive", "{k} must be a positive number (got {v})", {"k": k, "v": repr(v)})
        if k in _WHOLE and not isinstance(v, int):
            raise PydanticCustomError("whole", "{k} must be a whole number (got {v})", {"k": where, "v": repr(v)})
        if k in _CHOICES and v not in _CHOICES[k]:
            name = "check.kind" if k == "kind" else k
            raise PydanticCustomError("choice", "{k} {v} is not one of {c}", {"k": name, "v": repr(v), "c": ", ".join(_CHOICES[k])})
        if k == "notes" and not (isinstance(v, list) and all(isinstance(n, str) for n in v)):
            raise PydanticCustomError("notes", "notes must be a list of text")
        return v


class Check(_Strict):
    kind: str
    backend: str = ""  # backend or backend:variant (rate, phase)
    task: str = ""
    num_envs: int | None = None  # None: the largest measured
    frame_skip: int = 1  # frames per agent step as the claim counts them (frames/s)
    numerator: str = ""  # ratio
    denominator: str = ""
    phase: str = ""  # phase: vecenv, inference, update
    protocol_backend: str = ""  # gpuenv running the claim's own protocol (backend:variant)
    suite: str = ""  # training-ratio: the time-to-reward suite whose run checks it
    steps: int | float = 0.0  # arithmetic: steps at `rate` take the claim's value in seconds (as written: 1e9 or 1_000_000)
    rate: int | float = 0.0

    @model_validator(mode="after")
    def _what_the_kind_needs(self) -> Check:
        missing = [k for k in _NEEDS[self.kind] if not getattr(self, k)]
        if missing:
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise PydanticCustomError("needs", "{a} {kind} check needs {m}",
                                      {"a": article, "kind": self.kind, "m": ", ".join("check." + k for k in missing)})
        return self


class Claim(_Strict):
    id: str
    who: str
    stated: str  # the claim as written ("about 10x", "1.1M FPS")
    unit: str
    hardware: str
    hardware_class: str
    protocol: str
    source: str
    check: Check
    value: int | float | None = None  # as written (an int stays an int in --json)
    value_low: int | float | None = None
    value_high: int | float | None = None
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_value_or_a_range(self) -> Claim:
        if (self.value is not None) == (self.value_low is not None or self.value_high is not None) or (
                (self.value_low is None) != (self.value_high is None)):
            raise PydanticCustomError("value", "give either value or both value_low and value_high")
        if self.value_low is not None and self.value_high is not None and self.value_low > self.value_high:
            raise PydanticCustomError("range", "value_low is above value_high")
        return self

    @property
    def central(self) -> float:
        if self.value is not None:
            return self.value
        assert self.value_low is not None and self.value_high is not None
        return math.sqrt(self.value_low * self.value_high)  # a range's geometric middle

    def stated_range(self) -> tuple[float, float]:
        if self.value is not None:
            return self.value, self.value
        assert self.value_low is not None and self.value_high is not None
        return self.value_low, self.value_high


_CLAIM_REQUIRED = ("id", "who", "stated", "unit", "hardware", "hardware_class", "protocol", "source", "check")
_POSITIVE_ORDER = ("value", "value_low", "value_high", "steps", "rate", "num_envs", "frame_skip")
_NOT_A_TABLE = ("model_type", "dict_type", "model_attributes_type")


def _first_mistake(raw: dict, e: ValidationError | None, duplicate: bool) -> str | None:
    """The one mistake of a claim to report, in the order the register is read: unknown keys, text,
    missing keys, the check's shape, a repeated id, the claim's unit, hardware and value; then its
    check's keys and kind, the numbers, the text, the notes, the range and what the kind needs."""
    found: list[tuple[tuple[int, int, str, int], str]] = []
    for n, err in enumerate(e.errors(include_url=False) if e is not None else []):
        loc, kind = tuple(str(x) for x in err["loc"]), err["type"]
        key = loc[-1] if loc else ""
        nested = len(loc) > 1 and loc[0] == "check"
        if kind == "extra_forbidden":
            keys = sorted(Check.model_fields if nested else Claim.model_fields)
            found.append(((8 if nested else 0, 0, key, n), f"unknown {'check ' if nested else ''}key {key!r} (keys: {', '.join(keys)})"))
        elif nested and key == "kind" and kind in ("missing", "choice"):
            found.append(((9, 0, "", n), "check.kind must be one of " + ", ".join(KINDS)))
        elif kind == "missing":
            found.append(((2, _CLAIM_REQUIRED.index(key) if key in _CLAIM_REQUIRED else 99, "", n), f"missing {key!r}"))
        elif loc == ("check",) and kind in _NOT_A_TABLE:
            found.append(((3, 0, "", n), "check must be a table (check = { kind = ... })"))
        elif kind == "text":
            found.append(((12 if nested else 1, 0, "", n), err["msg"]))
        elif kind == "choice":
            found.append(((5 if key == "unit" else 6, 0, "", n), err["msg"]))
        elif kind == "positive":
            found.append(((10, _POSITIVE_ORDER.index(key), "", n), err["msg"]))
        elif kind == "whole":
            found.append(((11, _POSITIVE_ORDER.index(key), "", n), err["msg"]))
        elif kind == "notes":
            found.append(((13, 0, "", n), err["msg"]))
        elif kind == "needs":
            found.append(((15, 0, "", n), err["msg"]))
        else:  # the value rule and the range, when the fields themselves were fine
            found.append(((7 if kind == "value" else 14, 0, "", n), err["msg"]))
    if duplicate:
        found.append(((4, 0, "", 0), "the id is used twice"))
    has = [k for k in ("value", "value_low", "value_high") if k in raw]
    if ("value" in has) == ("value_low" in has or "value_high" in has) or ("value_low" in has) != ("value_high" in has):
        found.append(((7, 0, "", 0), "give either value or both value_low and value_high"))
    low, high = raw.get("value_low"), raw.get("value_high")
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)) and low > high:  # type: ignore[operator]
        found.append(((14, 0, "", 0), "value_low is above value_high"))
    return min(found, key=lambda f: f[0])[1] if found else None


def register_path() -> Path:
    return Path(os.environ.get("GPUENV_CLAIMS", REGISTER))


def load_register(path: Path | None = None) -> list[Claim]:
    """The claims of a register file; UserError naming the file, claim and key on any mistake."""
    path = path or register_path()
    where = str(path)
    data = inputs.read_toml(path, f"claims register {where} (GPUENV_CLAIMS names another)")
    unknown = set(data) - {"claim"}
    if unknown:
        raise UserError(f"claims register {where}: unknown top-level key {sorted(unknown)[0]!r} (only [[claim]] tables)")
    claims = data.get("claim", [])
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise UserError(f"claims register {where}: 'claim' must be [[claim]] tables, one per claim")
    out, seen = [], set()
    for i, c in enumerate(claims):
        cid = c["id"] if isinstance(c.get("id"), str) and c["id"] else f"#{i + 1}"
        what = f"claims register {where}, claim {cid}"
        claim, error = None, None
        try:
            claim = Claim.model_validate(c)
        except ValidationError as e:
            error = e
        mistake = _first_mistake(c, error, cid in seen)
        if mistake is not None or claim is None:
            raise UserError(f"{what}: {mistake or 'not a valid claim'}")
        seen.add(cid)
        out.append(claim)
    return out
