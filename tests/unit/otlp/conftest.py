"""The ingest rig's fixture (``tests/support/ingest_rig.py``) for these tests."""

from tests.support.ingest_rig import rig  # noqa: F401  (a fixture: pytest finds it by name here)
