"""Demo traffic and the `ragmon demo` command: synthetic data for trying ragmon end to end."""
