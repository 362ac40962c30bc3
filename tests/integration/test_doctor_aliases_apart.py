"""`duckgraph doctor` lists the aliases that an older duckgraph's name rule merged into an entity and this one keeps
apart ("C++" and "C#" into "C", when loose keys dropped symbols), with the call that removes them, until they are
removed. On a real DuckDB file whose name index is rebuilt from keys 3 at open, with Ollama's stand-in
(tests/ollama_server.py) as the embedder."""

from __future__ import annotations

from pathlib import Path

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder
from tests.integration.test_doctor import checks, doctor, env, use_ollama  # noqa: F401 (a fixture)
from tests.integration.test_name_keys_upgrade import as_name_keys_3
from tests.ollama_server import FakeOllama


def detail(report: dict, name: str) -> list[str]:
    return [check["detail"] for check in report["checks"] if check["check"] == name]


def test_doctor_lists_aliases_an_older_name_rule_merged_until_they_are_removed(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        embedder = OllamaEmbedder(base_url=ollama.base_url)
        with KnowledgeBase(DuckDBStore(db), embedder) as kb:
            kb.add_knowledge_graph([NodeInput(name="C", type="Language", aliases=["C++", "C#"]),
                                    NodeInput(name="Kubernetes", type="Technology", aliases=["K8s"])], [])
            kb.add_knowledge_graph([NodeInput(name="Rust", type="Language", aliases=["Rust#"])], [], namespace="work")
        as_name_keys_3(db)  # as a duckgraph whose loose keys dropped symbols left it
        use_ollama(env, ollama.base_url)

        code, report = doctor(capsys, db)
        assert code == 0, report  # a warning: the file works
        assert checks(report)["aliases"] is True
        assert detail(report, "aliases") == [
            "3 alias(es) of 2 entities that an older duckgraph's name rule joined to them and this one keeps apart, "
            "below"]
        assert [w for w in report["warnings"] if w.startswith("aliases merged by an older duckgraph")] == [
            "aliases merged by an older duckgraph, whose name rule dropped what this one keeps (symbols: 'C++' and "
            "'C#' were 'C'): each may be another thing, whose observations and relations were stored on the entity "
            "that has it. Where one is, remove the alias with the update_entity call given (or on the entity's page "
            "in `duckgraph ui`), create the other entity (create_entities, add_knowledge_graph) and move its "
            "observations and relations to it; where the alias is meant, keep it (it stays listed here): "
            "'C' has 'C++', 'C#': update_entity(name=\"C\", aliases=[], namespace=\"default\") | "
            "'Rust' has 'Rust#': update_entity(name=\"Rust\", aliases=[], namespace=\"work\")"]

        with KnowledgeBase(DuckDBStore(db), embedder) as kb:  # the calls given
            kb.curation.update_entity("C", "default", aliases=[])
            kb.curation.update_entity("Rust", "work", aliases=[])
        code, report = doctor(capsys, db)
        assert code == 0 and report["warnings"] == [], report
        assert detail(report, "aliases") == [
            "no alias that an older duckgraph's name rule joined to its entity and this one keeps apart"]
