"""The ``ragmon`` command line."""
