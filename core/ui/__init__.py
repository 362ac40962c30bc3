"""`duckgraph ui`: a local web page to explore, check and curate the memory (see docs/ui.md)."""
