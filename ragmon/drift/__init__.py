"""Drift detection: reference vs current window per (retriever, variant, stratum), feature and test.

Pure parts (no I/O, no clock): ``stats`` (KS, PSI, Wasserstein, proportion tests, Benjamini–Hochberg, from
samples and from quantile sketches), ``summary`` (per-window summaries), ``registry`` (the tests as records),
``decide`` (the three gates), ``windows`` and ``features`` (the plan from the config), ``result`` (the records
a check produces).
I/O: ``query`` (the ClickHouse aggregation), ``check`` (one check, stored and exported through ``export``),
``schedule`` (the daemon role), ``report`` (terminal and HTML), ``synthetic`` (generated traffic).
"""
