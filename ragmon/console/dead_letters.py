"""The Dead letters page's content: counts by reason over time, the newest letters with a safe preview of their
bytes, and the commands that put them back once the cause is fixed.

Owns how a letter is shown: at most ``PREVIEW_BYTES`` of its value, as text with every control or non-UTF-8 byte
escaped (``\\x1b``, ``\\n`` shown as such) and as a hex dump. Nothing here executes or interprets a letter: the
template escapes the text again (Jinja autoescape) and the page's CSP forbids inline script. ragmon has no replay
command of its own; ``replay_commands`` spells out the pipeline that replays through the traces topic (ingest
stores each valid trace once: inserts are idempotent). Must not read Kafka or files (``dead_letter_reading`` does).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from shlex import quote

from ragmon.config import KafkaSettings
from ragmon.console.dead_letter_reading import Letter
from ragmon.console.svg import stacked_bars

#: how much of a letter's value the page shows
PREVIEW_BYTES = 2048
HEX_WIDTH = 16
#: the newest letters listed
LATEST = 50
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@dataclass(frozen=True)
class LetterView:
    letter: Letter
    size: int
    text: str
    hex_lines: list[str]
    cut: bool  # the preview shows only the first PREVIEW_BYTES


@dataclass(frozen=True)
class DeadLetterPage:
    source: str
    read: int
    reasons: list[tuple[str, int]]
    hours: list[tuple[str, dict[str, int]]]  # "2026-12-03 13:00" → reason → count, newest first
    latest: list[LetterView]
    replay: list[str]

    @property
    def chart(self) -> str:
        """The counts per hour, oldest first, stacked by reason (inline SVG)."""
        return stacked_bars(list(reversed(self.hours)), [reason for reason, _ in self.reasons])


def escaped_text(data: bytes) -> str:
    """``data`` as one line of text: UTF-8 where valid; a byte that is not UTF-8 as ``\\xNN``, a control or other
    non-printable character as ``\\n``, ``\\t``, ``\\xNN`` or ``\\uNNNN``, and a backslash doubled."""
    out = []
    for ch in data.decode("utf-8", "surrogateescape"):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(_CONTROL.get(ch) or (f"\\x{code:02x}" if code < 0x100 else
                                           f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
    return "".join(out)


def hex_dump(data: bytes) -> list[str]:
    """``offset  hex bytes  ascii`` lines, 16 bytes each; non-printable bytes shown as '.'."""
    lines = []
    for off in range(0, len(data), HEX_WIDTH):
        row = data[off:off + HEX_WIDTH]
        ascii_part = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{off:08x}  {row.hex(' '):<{HEX_WIDTH * 3 - 1}}  {ascii_part}")
    return lines


def view(letter: Letter) -> LetterView:
    head = letter.value[:PREVIEW_BYTES]
    return LetterView(letter, len(letter.value), escaped_text(head), hex_dump(head), len(letter.value) > PREVIEW_BYTES)


def build_page(letters: list[Letter], source: str) -> DeadLetterPage:
    """Counts by reason (all read letters, and per hour written) and the ``LATEST`` newest, newest first."""
    reasons = Counter(letter.reason for letter in letters).most_common()
    by_hour: dict[str, Counter[str]] = {}
    for letter in letters:
        key = _hour(letter.written_at)
        by_hour.setdefault(key, Counter())[letter.reason] += 1
    hours = sorted(((k, dict(v)) for k, v in by_hour.items()), reverse=True)
    latest = [view(letter) for letter in reversed(letters[-LATEST:])]
    return DeadLetterPage(source, len(letters), reasons, hours, latest, [])


def _hour(when: datetime | None) -> str:
    return "(time unknown)" if when is None else when.strftime("%Y-%m-%d %H:00")


def replay_commands(kafka: KafkaSettings, dead_letter_file: Path | None) -> list[str]:
    """Shell commands that replay the letters into the traces topic (after the producer or config is fixed).

    JSON letters are compacted to one line each (``jq -c``) so a value with newlines survives ``kcat -P``'s line
    splitting; OTLP protobuf letters are binary and need a producer of your own."""
    brokers, traces = quote(kafka.bootstrap_servers), quote(kafka.topic)
    produce = f"kcat -P -b {brokers} -t {traces}"
    if dead_letter_file is not None:
        path = quote(str(dead_letter_file))
        return [f"jq -c 'select(.reason == \"REASON\") | .value | fromjson' {path} | {produce}",
                f"jq -r 'select(.reason == \"REASON\") | .value' {path} | ragmon ingest --file -   "
                "# when no daemon holds the embedded store"]
    dlq = quote(kafka.dead_letter_topic)
    return [f"kcat -C -b {brokers} -t {dlq} -o beginning -e -q -f '%s\\n' | jq -c . | {produce}"]
