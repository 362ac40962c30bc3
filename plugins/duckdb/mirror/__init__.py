"""The in-memory engine derived from the tables: what the DuckDB store keeps in memory to answer a search without
asking DuckDB.

- graph.py: `GraphMirror`, node records and names, edges with a CSR adjacency in both directions (links.py),
  provenance links between nodes and passages;
- vectors.py: `VectorIndex`, each kind's vectors with an IVF index over them above a size (built by ivf.py);
- matrix.py: the growable matrices the vectors live in, bfloat16, and the products a search computes;
- hnsw.py: `HnswMirror`, the vss HNSW index of the store option vector_index = "hnsw".

Everything here is derived data: built from the tables at open and changed only after a write has committed.
Registering the plugin imports these modules: numpy is imported on first use.
"""
