"""Shadow-mode comparison of a candidate retriever with production, on the same queries.

Modules, in the order a comparison uses them: ``pairs`` (the sides and the query parameters), ``queries``
(every SQL string: pairing by query_id and per-pair agreement in ClickHouse, judged pairs, canaries; the
``ShadowStore`` seam), ``quality`` (judge scores paired per fingerprint), ``canary`` (golden-set metrics on
matching live queries), ``agreement`` and ``stats`` (pure reference definitions and paired statistics),
``verdict`` (thresholds → promote/hold/reject, exit codes), ``examples`` (largest gains and losses),
``compare`` (assembles a ``result.ComparisonResult``), ``sections``/``report`` (rendering) and ``live``
(configured comparisons exported as Prometheus gauges). See docs/shadow.md.
"""
