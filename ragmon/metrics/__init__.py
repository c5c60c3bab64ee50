"""Evaluation metrics: pure functions (no I/O, no clock), shared by the offline gate and the live scorer."""
