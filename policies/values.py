"""Values read from a manifest as written by others: integers, numbers, Kubernetes quantities, mappings and lists,
each ``None`` or empty when the field holds something else (a ``$(VAR)``, a template placeholder), never an error."""

from __future__ import annotations

import re
from typing import Any


def as_int(value: object) -> int | None:
    """An integer from a manifest value (ints, numeric strings); None for anything else (``$(VAR)``, ``25%``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_QUANTITY = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?\s*")
_QUANTITY_SCALE = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                   "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def parse_quantity(value: object) -> float | None:
    """A Kubernetes resource quantity (``16Gi``, ``500m``, ``1e3``, ``4``) as a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value)
    if not match:
        return None
    number, exponent, suffix = match.groups()
    return float(number) * 10.0 ** int(exponent or 0) * _QUANTITY_SCALE[suffix]


def mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def string_map(value: object) -> dict[str, str]:
    """Labels or annotations as written, every key and value a string (YAML may hold numbers or booleans)."""
    return {str(k): str(v) for k, v in mapping(value).items()}


def sequence(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def strings(value: object) -> list[str]:
    return [str(item) for item in sequence(value)]

