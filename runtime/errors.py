"""Errors that name the setting, the value, the reason and a valid alternative."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


class PlanningError(ValueError):
    """A setting that cannot work, explained.

    ``setting`` is the path of the offending setting as the user wrote it (``models[0].engine.tensor_parallel_size``
    or a CLI flag), ``value`` what they gave, ``reason`` why it cannot work and ``alternative`` what would.
    """

    def __init__(self, setting: str, value: object, reason: str, alternative: str = "") -> None:
        self.setting = setting
        self.value = value
        self.reason = reason
        self.alternative = alternative
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = f"{self.setting}={self.value!r}: {self.reason}"
        if self.alternative:
            text += f"; {self.alternative}"
        return text

    def at(self, setting: str) -> PlanningError:
        """The same error, re-addressed to where the user wrote the setting."""
        return type(self)(setting, self.value, self.reason, self.alternative)


class UnknownIdError(PlanningError):
    def __init__(self, kind: str, value: str, suggestions: Sequence[str], valid: Sequence[str] = ()) -> None:
        if suggestions:
            alternative = "closest known: " + ", ".join(suggestions)
        else:
            alternative = "known: " + ", ".join(valid)
        self.kind = kind
        super().__init__(kind, value, f"unknown {kind}", alternative)
        self.suggestions = list(suggestions)
        self.valid = list(valid)

    def at(self, setting: str) -> PlanningError:
        return PlanningError(setting, self.value, self.reason, self.alternative)


def closest(key: str, candidates: Sequence[str], limit: int = 3) -> list[str]:
    """The candidates that look most like ``key`` (case-insensitive), best first."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    matches = difflib.get_close_matches(key.lower(), list(lowered), n=limit, cutoff=0.4)
    if not matches:
        matches = [c for c in lowered if key.lower() in c or c in key.lower()][:limit]
    return [lowered[m] for m in matches]
