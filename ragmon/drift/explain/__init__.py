"""``drift explain``: a feature's change decomposed per dimension, its SQL, choosing the check it explains, and the
top hint on a paging alert. Imports ``ragmon.drift.check`` and ``ragmon.drift.method``."""
