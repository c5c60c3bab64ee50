"""Question-type coverage: does the golden set still describe the questions live traffic asks (docs/coverage.md)."""
