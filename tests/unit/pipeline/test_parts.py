"""Redaction, batch limits, the dedup token and the offset ledger's commit rule."""

from __future__ import annotations

import json
import re
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.config import IngestSettings
from ragmon.contracts.decode import decode_trace
from ragmon.contracts.redact import Redactor, _has_digit
from ragmon.pipeline.batcher import Batch, BatchLimits
from ragmon.pipeline.offsets import OffsetLedger, release_trace
from ragmon.store.trace_rows import SourcePosition
from tests.conftest import make_trace
from tests.support.ingest_rig import trace_bytes

DEFAULTS = IngestSettings()


def decoded(**overrides):
    return decode_trace(json.dumps(make_trace(**overrides)).encode())


# -- redaction ------------------------------------------------------------------------------------------------

def test_default_patterns_redact_email_and_phone_in_question_and_answer_and_count_them():
    red = Redactor(DEFAULTS.redact_patterns, DEFAULTS.redact_fields)
    t = decoded(question="I am bob.smith+x@mail.example.org, call +1 (415) 555-0100", answer="mail a@b.co").trace
    out = red.trace(t)
    assert out.question == "I am [REDACTED:email], call [REDACTED:phone]"
    assert out.answer == "mail [REDACTED:email]"
    assert red.take_counts() == {"email": 2, "phone": 1}
    assert red.take_counts() == {}


def test_fields_not_listed_are_untouched_and_clean_traces_are_returned_as_is():
    red = Redactor(DEFAULTS.redact_patterns, ["question"])
    t = decoded(question="nothing here", answer="write to x@y.com").trace
    assert red.trace(t) is t
    t2 = decoded(retrieved=[{"chunk_id": "c", "score": 1.0, "rank": 1, "text": "x@y.com"}]).trace
    assert red.trace(t2).retrieved[0].text == "x@y.com"


def test_retrieved_text_and_quotes_when_configured():
    red = Redactor({"email": DEFAULTS.redact_patterns["email"]}, ["retrieved_text", "quotes"])
    t = decoded(retrieved=[{"chunk_id": "c", "score": 1.0, "rank": 1, "text": "ask x@y.com"}],
                citations=[{"sentence": 0, "chunk_id": "c", "quote": "x@y.com"}]).trace
    out = red.trace(t)
    assert out.retrieved[0].text == "ask [REDACTED:email]" and out.citations[0].quote == "[REDACTED:email]"


def test_feedback_comment_and_named_attribute_keys_when_configured():
    red = Redactor({"email": DEFAULTS.redact_patterns["email"]}, ["feedback_comment"], ["user_note", "absent"])
    t = decoded(feedback={"rating": -1, "comment": "reply to me@x.org"},
                attributes={"user_note": "I am me@x.org", "tenant": "a@b.co", "plain": "x"}).trace
    out = red.trace(t)
    assert out.feedback.comment == "reply to [REDACTED:email]"
    assert out.attributes == {"user_note": "I am [REDACTED:email]", "tenant": "a@b.co", "plain": "x"}
    clean = decoded(attributes={"user_note": "nothing", "tenant": "a@b.co"}).trace
    assert Redactor({"email": DEFAULTS.redact_patterns["email"]}, [], ["user_note"]).trace(clean) is clean


def test_unknown_field_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown redact field"):
        Redactor({}, ["questions"])


@given(st.text(alphabet=st.sampled_from("ab@.c+1234567890 ()-x"), max_size=120))
def test_redaction_leaves_no_match_behind(text):
    red = Redactor(DEFAULTS.redact_patterns, DEFAULTS.redact_fields)
    cleaned = red.text(text).replace("[REDACTED:email]", "\x00").replace("[REDACTED:phone]", "\x00")
    for pattern in DEFAULTS.redact_patterns.values():
        assert re.search(pattern, cleaned) is None


@given(st.text(alphabet=st.sampled_from("ab \u00e9\u0663\u0966\uff11" + "0123456789"), max_size=80)
       | st.text(max_size=80))
def test_digit_prefilter_agrees_with_the_regex_on_any_text(text):
    """The phone pattern's prefilter is a necessary condition: it finds every \\d, Unicode digits included."""
    assert _has_digit(text) == (re.search(r"\d", text) is not None)


def test_a_phone_number_in_non_ascii_digits_is_still_redacted():
    red = Redactor(DEFAULTS.redact_patterns, DEFAULTS.redact_fields)
    assert red.text("Ruf an: \u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669") == "Ruf an: [REDACTED:phone]"


#: the e-mail pattern before it started only at the start of a run: its matches, quadratic time on "a"*n + "@"
UNANCHORED_EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"


@given(st.text(alphabet=st.sampled_from("ab.@ -+%_c1x"), max_size=60))
def test_the_default_email_pattern_finds_what_the_unanchored_one_finds(text):
    # the look-behind only stops it from retrying inside a run of local-part characters (bench/redact.py times it)
    assert re.sub(DEFAULTS.redact_patterns["email"], "X", text) == re.sub(UNANCHORED_EMAIL, "X", text)


def test_a_case_insensitive_pattern_is_not_skipped_by_the_literal_prefilter():
    red = Redactor({"pw": r"(?i)password\s*[:=]\s*\S+", "ssn": r"(?i)ssn\s*\d{3}-\d{2}-\d{4}"}, ["question"])
    assert red.text("PASSWORD: hunter2, Ssn 123-45-6789") == "[REDACTED:pw] [REDACTED:ssn]"
    assert red.text("password: x") == "[REDACTED:pw]"


# -- batch limits and the dedup token -------------------------------------------------------------------------

def _batch(rows=10, bytes_=10_000_000, wait=1.0):
    return Batch(BatchLimits(rows, bytes_, wait), opened_at=0.0)


def _fill(batch, ids, partition=0, start=0):
    ledger = OffsetLedger()
    for i, tid in enumerate(ids):
        d = decoded(trace_id=tid)
        e = ledger.track(("t", partition), start + i, 1)
        batch.add_trace(d.trace, SourcePosition("t", partition, start + i), d.size_bytes, [e])
    return batch


def test_batch_is_full_at_max_rows_or_max_bytes_and_due_after_max_wait():
    b = _fill(_batch(rows=3), ["a", "b"])
    assert not b.full() and not b.due(0.5)
    assert b.due(1.0)
    _fill(b, ["c"])
    assert b.full()
    small = _fill(_batch(bytes_=2_000), ["a", "b"])
    assert small.full()
    assert not _batch().due(100.0), "an empty batch is never due"


def test_dedup_token_is_stable_for_a_batch_and_differs_between_batches():
    a1 = _fill(_batch(), ["a", "b", "c"])
    a2 = _fill(_batch(), ["a", "b", "c"])
    assert a1.dedup_token() == a2.dedup_token()
    assert "t/0/0-2" in a1.dedup_token()
    assert _fill(_batch(), ["a", "b", "c"], start=3).dedup_token() != a1.dedup_token()   # other offsets
    assert _fill(_batch(), ["a", "b", "x"]).dedup_token() != a1.dedup_token()            # other rows
    assert _fill(_batch(), ["a", "b", "c"], partition=1).dedup_token() != a1.dedup_token()


# -- the ledger ---------------------------------------------------------------------------------------------

def test_committable_is_the_closed_prefix():
    L = OffsetLedger()
    p = ("t", 0)
    e = [L.track(p, i, 1) for i in range(4)]
    release_trace([e[0]])
    release_trace([e[2]])
    assert L.committable() == {p: 1}
    release_trace([e[1]])
    assert L.committable() == {p: 3}
    L.mark_committed({p: 3})
    assert L.committable() == {}
    release_trace([e[3]])
    assert L.committable() == {p: 4}


def test_a_commit_never_lands_inside_a_stored_trace():
    """Trace A uses messages 0 and 1; trace B uses 1 and 2. A is stored, B still assembling: committing 1 would
    make a restart re-read message 1 alone and rebuild A from half its spans. The ledger keeps 0 open."""
    L = OffsetLedger()
    p = ("t", 0)
    m0, m1, m2 = L.track(p, 0, 1), L.track(p, 1, 2), L.track(p, 2, 1)
    release_trace([m0, m1])  # A stored
    assert L.committable() == {}
    release_trace([m1, m2])  # B stored
    assert L.committable() == {p: 3}


def test_messages_without_obligations_are_committable_at_once():
    L = OffsetLedger()
    p = ("t", 0)
    L.track(p, 0, 0)
    L.track(p, 1, 0)
    assert L.committable() == {p: 2}


# -- hostile input at the edges of the contract -----------------------------------------------------------------

def test_the_detail_header_is_cut_at_a_character_boundary():
    from ragmon.stream.dead_letter import MAX_DETAIL_BYTES, DeadLetter

    letter = DeadLetter("t", 0, 1, b"x", "invalid_otlp", "中" * 400)  # 1,200 bytes of 3-byte characters
    detail = dict(letter.kafka_headers())["ragmon.detail"]
    assert len(detail) <= MAX_DETAIL_BYTES and detail.decode("utf-8") == "中" * (MAX_DETAIL_BYTES // 3)


def test_json_nested_too_deeply_is_invalid_json_not_an_internal_error():
    from ragmon.contracts.decode import Rejection, decode_trace

    for data in (b"[" * 100_000 + b"]" * 100_000, b'{"trace_id": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"):
        result = decode_trace(data)
        assert isinstance(result, Rejection) and result.reason == "invalid_json", result


def test_the_last_millisecond_the_store_holds_is_accepted(rig):
    # the table's TTL and sort key compute in DateTime/Date, which end at 2106-02-07T06:28:15 (migration 0012)
    r = rig(max_batch_rows=100)
    r.source.append("t", 0, [trace_bytes(trace_id="last", timestamp="2106-02-07T06:28:15.999Z"),
                             trace_bytes(trace_id="after", timestamp="2106-02-07T06:28:16Z"),
                             trace_bytes(trace_id="far", timestamp="2299-12-31T23:59:59.999Z")])
    r.drive(5)
    assert [row["trace_id"] for row in r.writer.rows] == ["last"]
    assert [(d.offset, d.reason) for d in r.dlq.letters] == [(1, "invalid_value"), (2, "invalid_value")]
    assert all("the store's limit" in d.detail for d in r.dlq.letters)


def test_a_source_that_can_never_be_read_ends_the_loop_after_writing_and_committing_what_it_read(rig):
    from ragmon.errors import FatalSourceError

    r = rig(max_batch_rows=100)
    r.source.append("t", 0, [trace_bytes(trace_id=f"t{i}") for i in range(3)])
    r.pipeline.step()  # reads the three traces into the open batch
    r.source.poll_error = FatalSourceError("cannot read t: Libraries for zstd compression codec not found")
    polls = r.source.polls
    stop = threading.Event()
    r.pipeline.run(stop)  # returns by itself
    assert not stop.is_set() and isinstance(r.pipeline.fatal_error, FatalSourceError)
    assert r.source.polls == polls + 1, "never polled again after the fatal error"
    assert [row["trace_id"] for row in r.writer.rows] == ["t0", "t1", "t2"]
    assert r.source.committed == {("t", 0): 3}


def test_a_cut_dead_letter_keeps_the_first_bytes_fitting_headers_and_the_originals_facts():
    import hashlib

    from ragmon.stream.dead_letter import DeadLetter

    value = b"{" + b"x" * 5_000
    letter = DeadLetter("t", 2, 9, value, "schema", "Object missing required field `question`",
                        (("small", b"s"), ("big", b"b" * 2_000), ("ragmon.reason", b"spoofed"), ("after", b"a")))
    cut = letter.cut_to(100, 64)
    assert (cut.reason, cut.value, cut.cut) == ("too_large", value[:100], True)
    assert cut.headers == (("small", b"s"), ("after", b"a"))
    assert cut.original == ("schema", len(value), hashlib.sha256(value).hexdigest())
    assert "schema" in cut.detail and "question" in cut.detail
    again = cut.cut_to(0, 0)
    assert (again.value, again.headers, again.original, again.detail) == (b"", (), cut.original, cut.detail)
    headers = dict(again.kafka_headers())
    assert headers["ragmon.original.bytes"] == b"5001" and headers["ragmon.reason"] == b"too_large"
    assert letter.size_bytes() > len(value) > cut.size_bytes()
