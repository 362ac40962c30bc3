"""recent_changes lists the observations a write added to a stored entity and the property values it changed (real
DuckDB file, hashing embedder), and an import, which writes every observation anew, lists none of them added."""

from __future__ import annotations

import io
import time
from pathlib import Path

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder


def listed(kb: KnowledgeBase) -> list[tuple[str, str]]:
    return [(c.change, c.subject) for c in kb.recent_changes().changes]


def test_added_observations_and_changed_properties_are_listed_and_an_import_adds_no_such_line(
        fake_kb: KnowledgeBase, tmp_path: Path) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Ada", type="Person", properties={"role": "SRE", "level": 2},
                                           observations=["Works on payments"])], [])
    time.sleep(0.01)  # a later moment, as between two calls
    fake_kb.curation.add_observations("Ada", ["Moved to the search team", "Leads the on-call rota"], "default")
    time.sleep(0.01)
    fake_kb.add_knowledge_graph([NodeInput(name="Ada", type="Person", properties={"role": "lead"})], [])
    assert listed(fake_kb) == [
        ("entity updated", "Ada [Person]"),
        ("properties changed", "Ada [Person]: role: SRE -> lead"),  # merged on write: level stays as it was
        ("observations added", "Ada [Person]: Moved to the search team; Leads the on-call rota"),
        ("entity created", "Ada [Person]")]

    out = io.StringIO()
    export_jsonl(fake_kb, out)
    copy = KnowledgeBase(DuckDBStore(tmp_path / "copy.duckdb"), HashingEmbedder())
    with copy:
        import_lines(copy, io.StringIO(out.getvalue()))
        kinds = {change for change, _ in listed(copy)}
        assert "observations added" not in kinds and "properties changed" not in kinds
        assert copy.store.get_observations([copy.curation.resolve(["Ada"], "default")[0]["Ada"].id]).popitem()[1] \
            == ["Works on payments", "Moved to the search team", "Leads the on-call rota"]
