"""Which drift settings a read command applies: the daemon's, as its latest stored check recorded them.

Every stored check records the whole ``drift`` section it ran with (``drift_checks.settings``, migration 0019). A
command that re-evaluates checks — ``drift check [--at]``, ``drift backtest`` — is asked "what did (or would) the
daemon find", so it applies those settings rather than its own defaults: the demo's daemon, for one, checks
six-hour windows against the day before, and the CLI's defaults (an hour against the same hour of seven days)
found nothing but "too few samples" on the same data. A drift setting the command's own configuration sets
explicitly (the YAML file or a ``RAGMON_DRIFT__*`` variable) still wins — that is how a backtest tries another
``drift.alpha`` — and is named. With no stored check, or one stored before settings were recorded, the command's
own configuration applies.

Owns choosing the settings and saying where they came from; reads the latest check's through
``queries.latest_settings``, nothing else. Must not print.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ragmon.config import DriftSettings
from ragmon.drift.check.queries import DriftStore, latest_settings


@dataclass(frozen=True, slots=True)
class Applied:
    """The drift settings to apply, the stored check they came from (``None``: the command's own configuration)
    and the settings the command's configuration set explicitly that differ from the stored ones."""

    settings: DriftSettings
    check_id: str | None = None
    checked_at: datetime | None = None
    overridden: tuple[str, ...] = ()
    unreadable: bool = False  # the stored settings did not validate (another ragmon version): own config applied

    def describe(self) -> str:
        """One line for the terminal."""
        if self.check_id is None or self.checked_at is None:
            if self.unreadable:
                return ("the drift settings stored with the latest check are not readable by this version of ragmon; "
                        "this command's own drift configuration applies")
            return "no drift check is stored yet: this command's own drift configuration applies"
        text = (f"drift settings of the check stored at {self.checked_at:%Y-%m-%d %H:%M} UTC ({self.check_id[:12]}), "
                f"windows {_windows(self.settings)}")
        if self.overridden:
            text += "; this command's configuration sets " + ", ".join(self.overridden)
        return text


def record(settings: DriftSettings) -> str:
    """The ``settings`` column of a stored check: the whole drift section as JSON."""
    return json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def applied_settings(store: DriftStore, own: DriftSettings) -> Applied:
    """The settings a re-evaluating command applies: the latest stored check's, overridden by what ``own`` sets
    explicitly. Raises ``StoreError`` when the store cannot be read."""
    row = latest_settings(store)
    if row is None or not row["settings"]:
        return Applied(own)
    try:
        stored = DriftSettings.model_validate(json.loads(str(row["settings"])))
    except (ValueError, ValidationError):
        return Applied(own, unreadable=True)
    explicit = own.model_dump(mode="json", exclude_unset=True)
    merged = DriftSettings.model_validate(_merge(stored.model_dump(mode="json"), explicit))
    at = row["checked_at"]
    return Applied(merged, str(row["check_id"]), at.replace(tzinfo=UTC) if at.tzinfo is None else at,
                   tuple(_differences(stored.model_dump(mode="json"), explicit, "drift")))


def _merge(base: dict[str, Any], explicit: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in explicit.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _differences(base: dict[str, Any], explicit: dict[str, Any], prefix: str) -> list[str]:
    """Dotted names of the explicit settings whose value differs from the stored one."""
    out = []
    for key, value in sorted(explicit.items()):
        name = f"{prefix}.{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out.extend(_differences(base[key], value, name))
        elif base.get(key) != value:
            out.append(name)
    return out


def _windows(settings: DriftSettings) -> str:
    w = settings.windows
    length = f"{w.current_seconds // 3600} h" if w.current_seconds % 3600 == 0 else f"{w.current_seconds // 60} min"
    if w.reference == "pinned":
        return f"{length}, pinned reference"
    days = "the day" if w.reference_days == 1 else f"the {w.reference_days} days"
    return f"{length} against {days} before" + (" (same hours)" if w.same_hours else "")
