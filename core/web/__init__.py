"""Pages fetched over HTTP(S) and sites crawled, turned into documents (`duckgraph ingest URL`, `add_urls`)."""
