"""The scheduled drift check: the ClickHouse aggregation, one check stored and exported, the looks at the window in
progress, the schedule, the rendering of a stored check and the corpus's version feed. Imports ``ragmon.drift.method``;
must not import the simulation, the backtest or ``explain``."""
