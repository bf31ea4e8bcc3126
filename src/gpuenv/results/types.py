"""Strict scalar types and base models every record model uses. Types are strict where it matters: no
bool or str where a number is expected (an int is a fine float), no NaN or infinity, names safe in
file names and markup, values that reach a command line checked for what they are. A leaf module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

# --- strict scalar types, shared by every mode's model -------------------------------------------

Int = StrictInt
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
PosInt = Annotated[int, Field(strict=True, ge=1)]
Float = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # strict float still takes an int
NonNegFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
PosFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
Fraction = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=1)]
Str = StrictStr
Bool = StrictBool
# Safe in a file name and in rich markup: `sync[/]` or `a/b` are refused.
IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # suite, run, case and backend names: file names, never options
Identifier = Annotated[str, StringConstraints(strict=True, pattern=IDENTIFIER)]
MACHINE_NAME = r"^[A-Za-z0-9][A-Za-z0-9 _.+-]{0,63}$"  # a user's name for a machine: shown in every heading, no markup
MachineName = Annotated[str, StringConstraints(strict=True, pattern=MACHINE_NAME)]
WorkloadId = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{16}$")]
# Values that reach a command line or a file name (git, asv): what they are and nothing else, so a
# record's text can never become an option ("--output=...") or a path ("../..").
GIT_SHA = r"^[0-9a-f]{7,64}$"  # abbreviated to full; SHA-1 or SHA-256 repositories
GitSha = Annotated[str, StringConstraints(strict=True, pattern=GIT_SHA)]
PACKAGE_NAME = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$"  # PEP 508 names
PackageName = Annotated[str, StringConstraints(strict=True, pattern=PACKAGE_NAME)]
Version = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")]  # PEP 440 and local labels
EnvName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


def _aware_iso8601(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError("iso8601", "is not an ISO 8601 date and time") from None
    if parsed.tzinfo is None:
        raise PydanticCustomError("iso8601_tz", "has no timezone (write it as UTC, +00:00)")
    return value


Timestamp = Annotated[str, StringConstraints(strict=True), AfterValidator(_aware_iso8601)]


class Model(BaseModel):
    """A closed record part: unknown fields are refused, so a typo cannot pass unnoticed."""

    model_config = ConfigDict(extra="forbid")


class OpenModel(BaseModel):
    """A record part with known fields that also keeps whatever else its producer reports."""

    model_config = ConfigDict(extra="allow")


def presence(value: Any, *, needed: bool, when: str) -> Any:
    """Require `value` (not None) or its absence (None), whichever `when` calls for."""
    if needed and value is None:
        raise PydanticCustomError("needed", "is required when {when}", {"when": when})
    if not needed and value is not None:
        raise PydanticCustomError("not_allowed", "must be null when {when}", {"when": when})
    return value


def ordered(low: str, high: str) -> Any:
    """A field validator (assign it in a model's body) refusing `high` below `low`."""

    def check(cls: type, v: float, info: ValidationInfo) -> float:
        if low in info.data and v < info.data[low]:
            raise PydanticCustomError("ordered", "must be >= {name} ({low})", {"name": low, "low": info.data[low]})
        return v

    return field_validator(high, check_fields=False)(classmethod(check))  # type: ignore[arg-type]


