"""Built-in adapters, one module each. Each module registers factories through the duckgraph hooks."""
