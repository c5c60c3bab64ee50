"""The drift settings a read command (``drift check [--at]``, ``drift backtest``) runs with: the daemon's, as its
latest stored check recorded them, with what the command's own configuration sets explicitly
(``ragmon.drift.check.applied``). Owns saying which on stderr; must not run a check."""

from __future__ import annotations

from typing import Any

from ragmon.cli.common import err_console


def applied_drift_settings(store: Any, own: Any) -> Any:
    """The daemon's drift settings, as its latest stored check recorded them, with what this command's configuration
    sets explicitly (``ragmon.drift.check.applied``); says which on stderr."""
    from ragmon.drift.check.applied import applied_settings

    applied = applied_settings(store, own)
    if applied.check_id is not None or applied.unreadable:
        err_console.print(applied.describe(), highlight=False, soft_wrap=True, markup=False)
    return applied.settings
