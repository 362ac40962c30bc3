"""An import into a knowledge file opened read-only is refused before anything is embedded (a large memory.jsonl
took minutes to embed only to be refused), in either format, and leaves the file as it was. Real DuckDB files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError

from tests.fakes import HashingEmbedder

MEMORY = [{"type": "entity", "name": f"Mem {i}", "entityType": "thing", "observations": [f"obs {i}"]}
          for i in range(50)] + [{"type": "relation", "from": "Mem 0", "to": "Mem 1", "relationType": "knows"}]
NATIVE = [{"kind": "meta", "format": "duckgraph", "version": 1, "embeddings": False},
          {"kind": "node", "id": 1, "namespace": "default", "name": "Ada Lovelace", "type": "Person"}]


@pytest.mark.parametrize("lines", [MEMORY, NATIVE], ids=["memory", "duckgraph"])
def test_an_import_into_a_read_only_file_is_refused_before_embedding(tmp_path: Path, lines):
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        import_lines(kb, [json.dumps({"type": "entity", "name": "Seed", "entityType": "thing", "observations": []})])
    before = path.read_bytes()

    embedder = HashingEmbedder()
    with KnowledgeBase(DuckDBStore(path, read_only=True), embedder) as kb:
        with pytest.raises(StoreError, match=f"^this knowledge file is read-only: {path}"):
            import_lines(kb, [json.dumps(line) for line in lines])
        assert embedder.calls == []
        assert [n.name for n in kb.store.list_nodes("default")] == ["Seed"]
    assert path.read_bytes() == before
