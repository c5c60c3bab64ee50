"""How a command opens the store: directly, or, for a read while a daemon holds the embedded store, through it.

chDB lets one process open a data directory. ``open_store`` opens the configured store; when the embedded
directory is held by another process (``StoreLockedError``) a read command gets a ``RemoteReadStore`` that asks
the running daemon (``ragmon.store.remote``), so ``drift report``, ``store status`` and the rest print what they
would print locally while ``ragmon run`` runs. A command that writes passes ``writes=True`` and gets the lock error
itself (what to do), before doing any work. When neither works, one ``StoreLockedError`` says why for both.
Must not print or exit (``ragmon.cli.app.main`` prints the error and exits 3).
"""

from __future__ import annotations

from typing import Any

from ragmon.config import Settings
from ragmon.errors import StoreError, StoreLockedError


def open_store(settings: Settings, *, migrate: bool = True, writes: bool = False) -> Any:
    """The store of ``settings``: a ``ClickHouseStore``, or, for reads when a daemon holds the embedded
    directory, its read API (a ``RemoteReadStore``, which refuses writes)."""
    from ragmon.store import ClickHouseStore

    try:
        return ClickHouseStore.open(settings.store, migrate=migrate)
    except StoreLockedError as locked:
        if writes:
            raise
        from ragmon.store.remote import connect_remote

        try:
            return connect_remote(settings)
        except StoreError as remote:
            raise StoreLockedError(
                f"{locked} Reading through the process that holds it did not work either: {remote}") from None


def is_remote(store: Any) -> bool:
    """Whether ``store`` reads through a running daemon (and so cannot write). ``RemoteReadStore.read_only`` is
    ``True``; ``ClickHouseStore.read_only`` is a method (a second, read-only connection), truthy but not remote."""
    return getattr(store, "read_only", False) is True
