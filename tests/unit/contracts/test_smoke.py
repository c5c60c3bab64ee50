import json

from ragmon.contracts import DecodedTrace, Rejection, Trace, decode_trace
from tests.conftest import make_trace


def test_factory_trace_is_valid_for_both_decoders():
    raw = json.dumps(make_trace()).encode()
    assert isinstance(decode_trace(raw), DecodedTrace)
    Trace.model_validate_json(raw)


def test_wrong_type_is_rejected_with_the_field():
    raw = json.dumps(make_trace(question=42)).encode()
    result = decode_trace(raw)
    assert isinstance(result, Rejection)
    assert result.reason == "schema" and "question" in result.detail
