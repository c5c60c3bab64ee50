"""Synthetic traffic (``ragmon.drift.simulation.synthetic``, what ``ragmon drift simulate`` and the benchmarks write)
reads back as valid traces: every per-chunk array as long as the chunk list, so the console's trace page shows them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragmon.drift.simulation.synthetic import SyntheticSpec, insert_synthetic
from ragmon.store.trace_rows import SELECT_TRACE_COLUMNS, row_to_trace
from tests.integration.console.support import console_app
from tests.integration.review.support import signed_in


def test_synthetic_rows_read_back_as_traces_and_open_in_the_console(store):
    now = datetime.now(UTC).replace(microsecond=0)
    insert_synthetic(store, SyntheticSpec(300, now - timedelta(hours=1), now, empty_rate=0.2, k=4))
    rows = store.query_rows(f"SELECT {SELECT_TRACE_COLUMNS} FROM {store.table('traces')}")
    assert len(rows) == 300
    traces = [row_to_trace(r) for r in rows]
    lengths = {len(t["retrieved"]) for t in traces}
    assert lengths == {0, 4}  # some empty shortlists, the rest k chunks
    chunked = next(t for t in traces if t["retrieved"])
    assert all(c["text"] == f"Synthetic passage {c['chunk_id']}" for c in chunked["retrieved"])

    client = signed_in(console_app(store))
    page = client.get(f"/review/console/traces/{chunked['trace_id']}?at={chunked['timestamp'].replace('+', '%2B')}")
    assert page.status_code == 200
    assert f"Synthetic passage {chunked['retrieved'][0]['chunk_id']}" in page.text
