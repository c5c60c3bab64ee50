"""Signing out: sessions ended before they expire, recorded in the store so that every replica refuses them.

A session is a signed cookie (``auth.py``); deleting it from the browser does not stop a copy of it from
working. ``SignedOut.end(session)`` records the session's digest (SHA-256 of its CSRF token, a random secret of
that session; the token itself is never stored) through ``ReviewStore.sign_out``, and ``ReviewContext.session``
refuses any cookie whose session is recorded there. Rows expire a day after the session would have (TTL).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from ragmon.review.auth import Session
from ragmon.review.queries import ReviewStore


def session_digest(session: Session) -> str:
    return hashlib.sha256(session.csrf.encode()).hexdigest()


class SignedOut:
    """The signed-out sessions: written on sign-out, read on every request made with a session cookie."""

    def __init__(self, store: ReviewStore, clock: Callable[[], float]):
        self.store = store
        self.clock = clock
        self._seen: set[str] = set()  # signed out here or found in the store: never valid again
        self._lock = threading.Lock()

    def end(self, session: Session) -> None:
        """Record ``session`` as signed out (blocks until the store acknowledged)."""
        digest = session_digest(session)
        self.store.sign_out(digest, session.username, datetime.fromtimestamp(self.clock(), UTC),
                            datetime.fromtimestamp(session.expires_at, UTC))
        with self._lock:
            self._seen.add(digest)

    def __contains__(self, session: Session) -> bool:
        digest = session_digest(session)
        with self._lock:
            if digest in self._seen:
                return True
        found = self.store.is_signed_out(digest)
        if found:
            with self._lock:
                self._seen.add(digest)
        return found
