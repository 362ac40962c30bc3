"""recent_changes lists the observations a write added to a stored entity and the property values it changed (real
DuckDB file, hashing embedder), and an import, which writes every observation anew, lists none of them added."""

from __future__ import annotations

import io
import time
from pathlib import Path

from duckgraph.core.domain.history import forget_changes
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


def test_a_type_change_is_listed_old_to_new_and_the_entity_as_created_with_its_first_type(
        fake_kb: KnowledgeBase, db_path: Path) -> None:
    fake_kb.add_knowledge_graph([NodeInput(name="Jordan", type="Country", properties={"capital": "Amman"})], [])
    time.sleep(0.01)
    fake_kb.curation.update_entity("Jordan", "default", type="Person", properties={"capital": "n/a"})
    time.sleep(0.01)
    fake_kb.curation.update_entity("Jordan", "default", type="Engineer")
    expected = [
        ("entity updated", "Jordan [Engineer]"),
        ("type changed", "Jordan [Engineer]: Person -> Engineer"),
        ("properties changed", "Jordan [Person]: capital: Amman -> n/a"),
        ("type changed", "Jordan [Person]: Country -> Person"),
        ("entity created", "Jordan [Country]")]  # as created, not as it is now
    assert listed(fake_kb) == expected
    assert "type at creation" not in fake_kb.recent_changes().text
    fake_kb.close()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:  # read from the file by a later server
        assert listed(kb) == expected
        # Forgotten, the record of what was replaced goes, and the type the entity was created with: its created
        # line names the type it has.
        assert forget_changes(kb, "default") == 3
        assert listed(kb) == [("entity updated", "Jordan [Engineer]"), ("entity created", "Jordan [Engineer]")]
        kb.curation.update_entity("Jordan", "default", type="Person")
        kb.curation.delete_entities(["Jordan"], "default")
        kb.add_knowledge_graph([NodeInput(name="Jordan", type="Country")], [])
        # Deleting the entity deletes its lines, and the type it was created with, with it.
        assert [c for c in listed(kb) if c[0] != "entity deleted"] == [("entity created", "Jordan [Country]")]
        assert kb.store._con.execute("SELECT count(*) FROM deletions WHERE kind = 'type at creation'").fetchone() \
            == (0,)
