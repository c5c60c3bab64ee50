"""Permission leaks after ingest: listing the stored traces that leaked, for on-call (``ragmon leaks list``).

Counting happens at ingest (every trace, ``ragmon.metrics.permissions`` and the ``permission_leaks`` column);
the gate's leak check is in ``ragmon.gate.leaks``.
"""
