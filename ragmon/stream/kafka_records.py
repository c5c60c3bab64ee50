"""Reading Kafka records whose header keys are not UTF-8, so one such record never costs its neighbours.

Owns one narrow change to how kafka-python 3 parses v2 record batches, and telling such a record apart. The
protocol says a header key is a UTF-8 string; kafka-python's parser decodes it strictly and, when that fails,
raises ``CorruptRecordError`` without moving past the record. The rest of that record batch then cannot be
read at all: a producer batching with ``linger_ms`` put several traces in it, and each valid neighbour after the
bad record was dead-lettered as unreadable (a seek to the next offset fetches the same batch and fails on the
same record again). kafka-python offers no hook for this, so ``install()`` swaps in a subclass of its record
batch whose parser, only after the strict decode failed, reads that record again with such a key written with
``\\xNN`` escapes, as an ``UnreadableHeader`` (a tuple subclass: kafka-python still sees a ``(key, value)``
pair, and no producer can forge one). ``unreadable_headers`` finds them: the source dead-letters the record as
``unreadable_record`` with its value and headers, and its neighbours are read as usual.

Valid records take kafka-python's own parser unchanged (no cost on the hot path). It must not decide what
happens to such a record (the source does) nor touch anything else in kafka-python.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.record import default_records, memory_records
from kafka.record.util import decode_varint


class UnreadableHeader(tuple):
    """A ``(key, value)`` header whose key was not UTF-8 on the wire; the key holds it with ``\\xNN`` escapes."""


class TolerantRecordBatch(default_records.DefaultRecordBatch):
    """kafka-python's v2 record batch, reading a record with a non-UTF-8 header key instead of failing on it."""

    __slots__ = ()

    def _read_msg(self, decode_varint=decode_varint):  # type: ignore[no-untyped-def]
        try:
            return super()._read_msg(decode_varint)
        except UnicodeDecodeError:  # only a header key is decoded as text; self._pos has not moved
            return _read_tolerantly(self)


def _read_tolerantly(batch: default_records.DefaultRecordBatch) -> object:
    """kafka-python's ``DefaultRecordBatch._read_msg`` (3.0), with a non-UTF-8 header key kept escaped."""
    buffer, pos = batch._buffer, batch._pos
    length, pos = decode_varint(buffer, pos)
    start = pos
    _, pos = decode_varint(buffer, pos)  # attributes
    ts_delta, pos = decode_varint(buffer, pos)
    timestamp = (batch.max_timestamp if batch.timestamp_type == batch.LOG_APPEND_TIME
                 else batch.first_timestamp + ts_delta)
    offset_delta, pos = decode_varint(buffer, pos)
    key, pos = _nullable_bytes(buffer, pos)
    value, pos = _nullable_bytes(buffer, pos)
    count, pos = decode_varint(buffer, pos)
    if count < 0:
        raise default_records.CorruptRecordError(f"Found invalid number of record headers {count}")
    headers = []
    for _ in range(count):
        key_len, pos = decode_varint(buffer, pos)
        if key_len < 0:
            raise default_records.CorruptRecordError(f"Invalid negative header key size {key_len}")
        raw = bytes(buffer[pos:pos + key_len])
        pos += key_len
        h_value, pos = _nullable_bytes(buffer, pos)
        try:
            headers.append((raw.decode("utf-8"), h_value))
        except UnicodeDecodeError:
            headers.append(UnreadableHeader((raw.decode("utf-8", "backslashreplace"), h_value)))
    if pos - start != length:
        raise default_records.CorruptRecordError(
            f"Invalid record size: expected to read {length} bytes in record payload, but instead read {pos - start}")
    batch._pos = pos
    record_type = default_records.ControlRecord if batch.is_control_batch else default_records.DefaultRecord
    return record_type(length, batch.base_offset + offset_delta, timestamp, batch.timestamp_type, key, value, headers)


def _nullable_bytes(buffer: bytearray, pos: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buffer, pos)
    if size < 0:
        return None, pos
    return bytes(buffer[pos:pos + size]), pos + size


def install() -> None:
    """Make kafka-python's consumers read record batches with ``TolerantRecordBatch`` (idempotent)."""
    memory_records.DefaultRecordBatch = TolerantRecordBatch  # type: ignore[misc]


def unreadable_headers(headers: Iterable[tuple[str, bytes | None]]) -> list[str]:
    """The keys of the headers that were not UTF-8 on the wire, as escaped text."""
    return [h[0] for h in headers if type(h) is UnreadableHeader]


#: each compression codec Kafka has → the package kafka-python needs to read it (gzip is in the standard library)
CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


def missing_codecs() -> list[str]:
    """The codecs kafka-python cannot decompress in this installation, as ``"zstd (zstandard)"``."""
    from kafka import codec

    have = {"snappy": codec.has_snappy(), "lz4": codec.has_lz4(), "zstd": codec.has_zstd()}
    return [f"{name} ({CODEC_PACKAGES[name]})" for name, ok in have.items() if not ok]
