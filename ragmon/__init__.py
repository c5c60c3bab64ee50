"""ragmon: production monitoring for retrieval-augmented generation systems."""

__version__ = "0.1.0"
