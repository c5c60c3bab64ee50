"""Live scoring: sampled traces → the pinned judge → the metrics library → ``scores`` (with the fingerprint)."""
