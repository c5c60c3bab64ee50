"""What a test does when a real part it needs (a broker, promtool, helm, Chromium, Java) is not installed."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """CI=true (any case): set by scripts/test, which installs every part, and by most CI runners."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(message: str) -> NoReturn:
    """Fail under CI, where a missing part is a broken set-up that must not pass as skipped tests; skip otherwise
    (a developer running one file without the part installed)."""
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)
