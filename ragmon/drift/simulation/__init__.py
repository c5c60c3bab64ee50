"""Simulated traffic for measuring the drift detector: generated windows and their offline check (pure), and traffic
written into the store (``ragmon drift simulate``, benchmarks, tests). Imports ``ragmon.drift.method`` only."""
