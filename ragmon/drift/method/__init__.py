"""The drift method, pure (no I/O, no clock): summaries and series of windows, the tests and their registry, the
CUSUM, the decision, one check's assessment, and the windows and features planned from the config. Must not import
any other part of ``ragmon.drift``."""
