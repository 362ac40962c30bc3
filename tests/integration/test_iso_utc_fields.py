"""The times shown beside stored data, a namespace's `last_write` and a community build's `freshness.built_at`,
are the stored (naive UTC) moments written as ISO 8601 with "Z" (core/domain/moments.py's iso_utc): the same text
as before they shared the helper (last_write to the second, built_at as stored)."""

from __future__ import annotations

import re
from pathlib import Path

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.domain.namespaces import list_namespaces
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from tests.fakes import HashingEmbedder


def test_last_write_and_built_at_are_the_stored_moments_in_iso_utc(db_path: Path) -> None:
    names = ["Ravi", "Acme", "Globex", "Mina"]
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), community_detector=LeidenDetector()) as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type="Thing") for n in names],
                               [EdgeInput(source=a, target=b, type="KNOWS") for a, b in zip(names, names[1:])])
        kb.communities.build("default")

        [listed] = list_namespaces(kb).namespaces
        [stored] = kb.store.namespace_summaries()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", listed.last_write)
        assert listed.last_write == stored["last_write"].strftime("%Y-%m-%dT%H:%M:%SZ")

        built_at = kb.store.community_build("default").built_at
        freshness = kb.communities.freshness("default")
        assert freshness.built_at == built_at.isoformat() + "Z"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", freshness.built_at)
