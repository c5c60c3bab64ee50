"""``drift backtest``: the check replayed over stored history. Imports ``ragmon.drift.check`` and
``ragmon.drift.method``."""
