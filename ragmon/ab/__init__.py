"""A/B cohort comparison: a canary retriever's cohort against production on user outcomes, latency and quality."""
