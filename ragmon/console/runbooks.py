"""The runbooks the daemon serves itself (``/review/console/runbooks/<AlertName>.md``), so an alert's
``runbook_url`` opens without a wiki: ``console.runbook_base_url`` unset, the alerts link here
(``ragmon.process`` exports the address in ``ragmon_links_info``).

The runbooks are ``alerts/runbooks/*.md``, shipped in the package (``ragmon/console/runbooks`` is that directory).
Owns listing them and reading one by its exact name; a name that is not a shipped runbook is ``None``, never a
path. Must not write anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

#: an alert's runbook: Ragmon<Subject><Condition>.md (STYLE.md)
_NAME = re.compile(r"Ragmon[A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class Runbook:
    name: str  # the alert's name
    title: str
    text: str


def names() -> list[str]:
    """The alert names that have a runbook, sorted."""
    folder = resources.files("ragmon.console").joinpath("runbooks")
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md") and _NAME.fullmatch(p.name[:-3]))


def load(name: str) -> Runbook | None:
    """The runbook of alert ``name`` (``RagmonX`` or ``RagmonX.md``); ``None`` when there is none."""
    alert = name[:-3] if name.endswith(".md") else name
    if not _NAME.fullmatch(alert) or alert not in names():
        return None
    text = resources.files("ragmon.console").joinpath("runbooks", f"{alert}.md").read_text(encoding="utf-8")
    title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), alert)
    return Runbook(alert, title, text)
