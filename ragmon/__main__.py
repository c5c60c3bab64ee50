"""``python -m ragmon``: the same as the ``ragmon`` command (used by tests to run this checkout)."""

from ragmon.cli.app import main

main()
