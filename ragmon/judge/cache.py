"""``VerdictCache``: verdicts already paid for, keyed by (trace content hash, judge fingerprint).

The key holds the fingerprint, so a new model, prompt or temperature never reuses an old verdict; it holds the
content hash rather than the trace id, so a re-delivered trace or a shadow twin with the same context and
answer is judged once. Bounded (least recently used out), thread-safe, in memory only.

With many judge calls in flight, identical traces arrive together (a shadow twin beside its production query,
a re-delivered batch): ``claim`` lets one caller judge a key while the others wait for its verdict instead of
paying for the same call again (single flight). A waiter whose owner failed claims the key itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ragmon.metrics.verdicts import Verdicts


class VerdictCache:
    """An LRU map of (content hash, fingerprint) → ``Verdicts``. ``max_entries`` 0 disables it."""

    def __init__(self, max_entries: int):
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], Verdicts] = OrderedDict()
        self._lock = threading.Lock()
        self._claimed: dict[tuple[str, str], threading.Event] = {}
        self.hits = 0
        self.misses = 0

    def get(self, content_hash: str, fingerprint: str) -> Verdicts | None:
        with self._lock:
            found = self._data.get((content_hash, fingerprint))
            if found is None:
                self.misses += 1
                return None
            self._data.move_to_end((content_hash, fingerprint))
            self.hits += 1
            return found

    def peek(self, content_hash: str, fingerprint: str) -> bool:
        """Whether verdicts are cached, without counting a hit or a miss or refreshing the entry."""
        with self._lock:
            return (content_hash, fingerprint) in self._data

    def put(self, content_hash: str, fingerprint: str, verdicts: Verdicts) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            self._data[(content_hash, fingerprint)] = verdicts
            self._data.move_to_end((content_hash, fingerprint))
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def claim(self, content_hash: str, fingerprint: str) -> threading.Event | None:
        """None when the caller now owns the key and must judge it (then ``release`` it, success or not); else
        the event its current owner sets on release — wait on it, then look in the cache again."""
        if self.max_entries == 0:
            return None
        key = (content_hash, fingerprint)
        with self._lock:
            event = self._claimed.get(key)
            if event is None:
                self._claimed[key] = threading.Event()
            return event

    def release(self, content_hash: str, fingerprint: str) -> None:
        with self._lock:
            event = self._claimed.pop((content_hash, fingerprint), None)
        if event is not None:
            event.set()

    def __len__(self) -> int:
        return len(self._data)
