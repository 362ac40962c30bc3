"""The `duckgraph` commands big enough for a module of their own (core/cli.py holds the parser and the rest)."""
