"""The ragmon exception tree.

Client-library exceptions (kafka-python, clickhouse-connect, chDB, httpx) are translated into these at the
adapter boundary; code above an adapter never catches a third-party exception.

    RagmonError
    ├── ConfigError            bad settings, found at start-up (one line per problem)
    ├── StoreError             anything the store adapter could not do
    │   ├── RetryableStoreError    the server is down, timed out, or busy: try again later
    │   ├── PermanentStoreError    bad SQL, bad data, permission denied: retrying will not help
    │   └── StoreLockedError       another process holds the embedded chDB data directory
    ├── SourceError            the trace source (Kafka) failed
    │   ├── RetryableSourceError
    │   └── FatalSourceError       the source can never be read as it is (a codec's library is missing): stop
    ├── JudgeError             a judge call failed
    │   └── RetryableJudgeError    429, 5xx, timeout
    └── InputError             a user-supplied file or argument is malformed (golden set, labels file, …)

Unknown failures are permanent: retrying something nobody classified hides bugs.
"""

from __future__ import annotations


class RagmonError(Exception):
    """Base class for every error ragmon raises on purpose."""

    #: whether trying the same operation again later may succeed
    retryable: bool = False


class ConfigError(RagmonError):
    """Settings are invalid. ``problems`` holds one human-readable line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in self.problems))


class StoreError(RagmonError):
    """The store could not do what was asked."""


class RetryableStoreError(StoreError):
    retryable = True


class PermanentStoreError(StoreError):
    retryable = False


class StoreLockedError(PermanentStoreError):
    """The embedded chDB data directory is held by another process (chDB allows one per directory)."""


class SourceError(RagmonError):
    """The trace source could not be read or committed."""


class RetryableSourceError(SourceError):
    retryable = True


class FatalSourceError(SourceError):
    """The source cannot be read as it is, and no retry can change that (e.g. a record batch compressed with a codec
    whose library is not installed): the loop stops and the process exits with a code that says so."""


class JudgeError(RagmonError):
    """A judge could not return verdicts."""


class RetryableJudgeError(JudgeError):
    retryable = True


class InputError(RagmonError):
    """A user-supplied file or argument is malformed; the message says where and what to do."""
