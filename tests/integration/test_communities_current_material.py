"""The material a model is handed to write a community's report, between builds (a real DuckDB file; hashed
vectors: the behaviour does not depend on the model): an extractive report's, as global_search shows it, written
again from the members as they are now; only for the communities handed over, however many changed."""

from __future__ import annotations

from duckgraph.core.domain.communities import freshness
from duckgraph.core.domain.communities import service as service_module
from tests.integration.test_communities_current import kb, report  # noqa: F401 (kb: a fixture)


class RecordingWriter:
    """A model that writes a fixed report and keeps the material it was given."""

    def __init__(self) -> None:
        self.materials: list[str] = []

    def write_report(self, material: str) -> dict[str, str]:
        self.materials.append(material)
        return {"title": "Nightjar", "summary": "Priya Raman leads the Nightjar team."}


def test_a_model_writes_an_extractive_report_from_its_members_as_they_are_now(kb):  # noqa: F811
    nightjar = report(kb, "Project Nightjar")[0]
    kb.curation.update_entity("Priya Raman", "default", description="Leads the Nightjar team.")
    shown = report(kb, "Project Nightjar")[0]
    assert "Priya Raman (Thing): Leads the Nightjar team." in shown.summary
    writer = RecordingWriter()
    written = kb.communities.write_reports("default", writer, author="model", limit=5)
    assert written.written == len(writer.materials) >= 2
    (material,) = [m for m in writer.materials if m.startswith(f"Community {nightjar.id} ")]
    assert "- Priya Raman (Thing): Leads the Nightjar team." in material
    assert "About Priya Raman." not in material


def test_past_the_changes_read_only_the_communities_listed_are_written_again(kb, monkeypatch):  # noqa: F811
    monkeypatch.setattr(freshness, "CHANGES_READ", 1)  # more changes than read: which reports changed is unknown
    kb.curation.update_entity("Priya Raman", "default", description="Leads the Nightjar team.")
    kb.curation.update_entity("Lena Vogel", "default", description="Leads the Kestrel team.")
    calls = []
    original = service_module.as_now
    monkeypatch.setattr(service_module, "as_now", lambda *args: calls.append(args[1].id) or original(*args))
    listed = kb.communities.to_write("default", limit=1)
    (first,) = listed.communities
    assert listed.remaining >= 1 and calls == [first.id]  # not every extractive report: those handed over
    assert "Leads the" in first.material
    assert "About Priya Raman." not in first.material and "About Lena Vogel." not in first.material
