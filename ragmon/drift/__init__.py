"""Drift detection: reference vs current window per (retriever, variant, stratum), feature and test.

Sub-packages, dependencies pointing one way (the import-linter contract "drift's parts point one way"):

* ``method`` — pure (no I/O, no clock): per-window summaries and series, the tests as records (``registry``,
  ``window_tests``, ``baseline``), the CUSUM (``sequential``), the three gates (``decide``), one check's
  assessment (``assess``), the plan from the config (``windows``, ``features``). Imports nothing else of drift.
* ``check`` — the scheduled check: the ClickHouse aggregation (``query``), one check stored and exported
  (``check``, ``result``, ``export``, ``applied``, ``replay``), the looks between checks (``watch``), the daemon
  role's schedule (``schedule``), rendering (``report``), the corpus's version feed (``corpus``). Imports ``method``.
* ``simulation`` — generated traffic and checks of it without a store (``draw``, ``traffic``, ``by_query``,
  ``offline``), and written into the store (``simulate``, ``synthetic``, ``incidents``). Imports ``method``.
* ``backtest`` — replaying the check over stored history. Imports ``check`` and ``method``.
* ``explain`` — ``drift explain``: what changed, per dimension, and the alert's top hint. Imports ``check`` and
  ``method``.

``role.py`` (the drift role as a process starts it) stays at the top, where ``ragmon.process`` finds it.
"""
