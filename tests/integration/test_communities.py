"""Communities on a real DuckDB file with the real default model: planted clusters found, reports of the three
kinds (extractive, the Ollama model's against FakeOllama, the host's), global search, freshness after writes,
namespaces kept apart, search naming its anchors' communities, and export/import followed by a rebuild."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from duckgraph.core.domain.communities import vectors
from duckgraph.core.domain.communities.global_search import WITHHELD
from duckgraph.core.domain.communities.hierarchy import reuse_reports
from duckgraph.core.domain.communities.reports import report_text
from duckgraph.core.domain.communities.service import (
    BROAD_IF_NOTHING,
    NO_COMMUNITIES,
    NO_RELATIONS,
    NONE_LEFT,
)
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_file
from duckgraph.core.plugin_manager import create, factories
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from duckgraph.plugins.ollama import OllamaExtractor
from duckgraph.ports import InvalidInputError, NotFoundError
from duckgraph.ports.communities import CommunityRecord

from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama

pytestmark = pytest.mark.model

#: Planted clusters: each theme's entities are densely related among themselves, barely to the others.
THEMES = {
    "astronomy": ("Planet", ["Jupiter", "Saturn", "Mars", "Venus", "Neptune", "Uranus", "Mercury", "Pluto"]),
    "cooking": ("Dish", ["Lasagna", "Risotto", "Paella", "Ratatouille", "Goulash", "Moussaka", "Couscous", "Sushi"]),
    "football": ("Club", ["Arsenal", "Chelsea", "Liverpool", "Juventus", "Barcelona", "Bayern Munich", "Ajax",
                          "Benfica"]),
    "music": ("Composer", ["Mozart", "Beethoven", "Bach", "Chopin", "Vivaldi", "Brahms", "Schubert", "Haydn"]),
    "medicine": ("Drug", ["Aspirin", "Ibuprofen", "Penicillin", "Insulin", "Metformin", "Morphine", "Warfarin",
                          "Heparin"]),
}
RELATIONS = {"astronomy": "ORBITS_NEAR", "cooking": "SERVED_WITH", "football": "PLAYED_AGAINST",
             "music": "INFLUENCED", "medicine": "INTERACTS_WITH"}
QUERIES = {"astronomy": "planets of the solar system", "cooking": "recipes and dishes to cook",
           "football": "football clubs and matches", "music": "classical composers",
           "medicine": "drugs and their interactions"}


def planted_graph(themes: dict = THEMES, prefix: str = "") -> tuple[list[NodeInput], list[EdgeInput]]:
    nodes, edges = [], []
    for theme, (kind, names) in themes.items():
        nodes += [NodeInput(name=prefix + name, type=kind, description=f"A {kind.lower()} ({theme}).")
                  for name in names]
        for i, name in enumerate(names):  # a ring and its chords: every entity has 4 links inside its theme
            for step in (1, 2):
                edges.append(EdgeInput(source=prefix + name, target=prefix + names[(i + step) % len(names)],
                                       type=RELATIONS[theme]))
    themes_list = list(themes.values())
    for (_, a), (_, b) in zip(themes_list, themes_list[1:]):  # one weak link between neighbouring themes
        edges.append(EdgeInput(source=prefix + a[0], target=prefix + b[0], type="MENTIONED_WITH", weight=0.1))
    return nodes, edges


def theme_of(name: str) -> str:
    return next(theme for theme, (_, names) in THEMES.items() if name.split(":")[-1] in names)


def knowledge_base(path: Path, embedder, **options) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector(), **options)


@pytest.fixture
def kb(db_path: Path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.keeper.settle = 0.2
        yield kb


def test_the_planted_clusters_are_the_communities_and_their_reports_are_extractive(kb):
    progress = []
    built = kb.communities.build("default", lambda done, total, message: progress.append((done, total)))
    assert (built.entities, built.relations, built.reports_written) == (40, 84, built.communities)
    assert progress[-1] == (4, 4)
    found = kb.store.communities("default")
    top = [c for c in found if c.level == 0]
    names = {n.id: n.name for n in kb.store.get_nodes({m for c in top for m in c.members})}
    assert sorted({theme_of(names[m]) for m in c.members}.pop() for c in top) == sorted(THEMES)
    assert all(len({theme_of(names[m]) for m in c.members}) == 1 for c in top)
    for community in top:
        report = community.details
        assert community.author == "extractive" and not community.stale
        assert len(report["entities"]) == 8 and report["types"][0]["count"] == 8
        assert report["facts"] and all(any(e["name"] in fact for e in report["entities"]) for fact in report["facts"])
        assert community.title.split(", ")[0] in {e["name"] for e in report["entities"]}


def test_global_search_returns_the_theme_named_first_within_the_budget(kb):
    kb.communities.build("default")
    for theme, query in QUERIES.items():
        result = kb.communities.global_search(query, "default")
        first = result.reports[0]
        assert {theme_of(e.name) for e in first.key_entities} == {theme}, (query, first.title)
        assert result.freshness is not None and result.freshness.changed_share == 0.0
    small = kb.communities.global_search("composers", "default", token_budget=100)
    assert len(small.reports) == 1 and small.truncated
    broad = kb.communities.global_search("What are the main themes?", "default", token_budget=5_000)
    assert len(broad.reports) == 5 and not broad.truncated
    with pytest.raises(InvalidInputError, match="level 7 does not exist"):
        kb.communities.global_search("composers", "default", level=7)


def test_small_communities_get_their_vectors_from_their_central_members_without_the_model(kb, monkeypatch):
    embedded = []
    real = kb.embedder.embed_documents
    monkeypatch.setattr(kb.embedder, "embed_documents", lambda texts: embedded.extend(texts) or real(texts))
    kb.communities.build("default")
    assert embedded == []
    found = [c for c in kb.store.communities("default", vectors=True) if c.level == 0]
    by_name = {n.name: n.id for n in kb.store.list_nodes("default", limit=100)}
    entities = kb.store.get_vectors("node", by_name.values())
    for community in found:  # the report's vector is its central entities', and closer to them than to the others
        assert abs(float(np.linalg.norm(community.embedding)) - 1.0) < 1e-5
        similarity = {other.id: cosine(community.embedding, np.mean(
            [entities[by_name[e["name"]]] for e in other.details["entities"][:5]], axis=0)) for other in found}
        assert max(similarity, key=similarity.get) == community.id and similarity[community.id] > 0.9
        assert cosine(community.embedding, real([report_text(community)])[0]) > 0.6, community.title


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_a_rebuild_embeds_only_the_reports_whose_text_changed(kb, monkeypatch):
    monkeypatch.setattr(vectors, "DERIVED_MAX_MEMBERS", 0)  # every report's vector from its text, by the model
    kb.communities.build("default")
    before = {c.title: c for c in kb.store.communities("default", vectors=True)}
    # A new planet tied to the most central one only: astronomy's members change, its central names do not.
    kb.add_knowledge_graph([NodeInput(name="Ceres", type="Planet", description="A dwarf planet (astronomy).")],
                           [EdgeInput(source="Ceres", target="Jupiter", type="ORBITS_NEAR")])
    embedded = []
    real = kb.embedder.embed_documents
    monkeypatch.setattr(kb.embedder, "embed_documents", lambda texts: embedded.extend(texts) or real(texts))
    rebuilt = kb.communities.build("default")
    after = {c.title: c for c in kb.store.communities("default", vectors=True)}
    assert after.keys() == before.keys() and rebuilt.reports_written == 1 and embedded == []
    astronomy = next(c for title, c in after.items() if "Jupiter" in title)
    assert len(astronomy.members) == len(before[astronomy.title].members) + 1
    assert (astronomy.embedding == before[astronomy.title].embedding).all()


def test_before_a_build_global_search_says_how_to_build(kb):
    assert kb.communities.global_search("main themes", "default").hint == NO_COMMUNITIES


def test_search_names_its_anchors_community_and_points_broad_questions_to_global_search(kb):
    before = kb.search("Mozart and Beethoven")
    assert before.anchor_communities == {} and before.hint is None
    kb.communities.build("default")
    found = kb.search("Mozart and Beethoven")
    composers = {c.id for c in kb.store.communities("default") if c.level == 0 and "Mozart" in json.dumps(c.details)}
    assert found.anchor_communities["Mozart"].endswith(f"(community {composers.pop()})")
    assert found.hint is None
    # Four things named, in four communities: the question is about them, not about the memory as a whole.
    named = kb.search("Jupiter, Lasagna, Arsenal, Aspirin")
    assert len(set(named.anchor_communities.values())) >= 3 and named.hint is None
    broad = kb.search("What are the main themes?")  # nothing relevant: the text says which tool answers the whole
    assert broad.nothing_relevant and broad.hint == BROAD_IF_NOTHING and BROAD_IF_NOTHING in broad.text


def test_the_communities_named_by_search_fit_in_its_token_budget(kb):
    kb.communities.build("default")
    for budget in (100, 300, 2_000):
        found = kb.search("What are the main themes?", token_budget=budget)
        assert found.hint == BROAD_IF_NOTHING  # the structured result has it, always
        assert estimate_tokens(found.text) <= budget
        assert BROAD_IF_NOTHING in found.text  # its room is set aside first: it tells the model what to call instead
        named = kb.search("Jupiter, Lasagna, Arsenal, Aspirin", token_budget=budget)
        assert named.anchor_communities and estimate_tokens(named.text) <= budget
    assert named.text.splitlines()[-1].startswith("Communities: ")  # last, with room for it


def test_writes_beyond_the_share_rebuild_in_the_background_and_results_say_how_fresh(kb):
    kb.communities.build("default")
    first = kb.store.community_build("default").built_at
    kb.add_knowledge_graph([NodeInput(name="Mars rover", type="Vehicle")],
                           [EdgeInput(source="Mars rover", target="Mars", type="EXPLORES")])
    assert kb.communities.keeper.idle.wait(10)
    fresh = kb.communities.global_search("planets", "default").freshness
    assert 0 < fresh.changed_share < 0.2 and not fresh.stale  # 2 of 124: below the share, no rebuild
    assert kb.store.community_build("default").built_at == first

    nodes, edges = planted_graph({"astronomy": THEMES["astronomy"], "music": THEMES["music"]}, prefix="new:")
    kb.add_knowledge_graph(nodes, edges)  # 16 entities and 33 relations more: 40% of the graph
    assert kb.communities.keeper.idle.wait(30)
    assert kb.store.community_build("default").built_at > first
    fresh = kb.communities.global_search("planets", "default").freshness
    assert fresh.changed_share == 0.0 and not fresh.rebuilding
    assert len([c for c in kb.store.communities("default") if c.level == 0]) == 7


def test_host_reports_are_kept_while_their_community_holds_and_marked_stale_after(kb):
    kb.communities.build("default")
    waiting = kb.communities.to_write("default", limit=2)
    assert len(waiting.communities) == 2 and waiting.remaining == 3
    chosen = waiting.communities[0]
    assert "Entities:" in chosen.material and "Facts:" in chosen.material
    theme = theme_of(chosen.material.split("\n")[2][2:].split(" (")[0])
    kb.communities.save_written("default", chosen.id, f"The {theme} theme", f"All about {theme}, " * 5)
    with pytest.raises(NotFoundError, match="no community 999"):
        kb.communities.save_written("default", 999, "A title", "A summary long enough.")
    with pytest.raises(InvalidInputError, match="title and a summary"):
        kb.communities.save_written("default", chosen.id, " ", "A summary long enough.")

    result = kb.communities.global_search(QUERIES[theme], "default")
    assert (result.reports[0].title, result.reports[0].author) == (f"The {theme} theme", "host")
    assert chosen.id not in {c.id for c in kb.communities.to_write("default", limit=10).communities}

    kb.communities.build("default")  # nothing changed: the report stays as it is
    kept = next(c for c in kb.store.communities("default") if c.title == f"The {theme} theme")
    assert (kept.author, kept.stale) == ("host", False)

    name = THEMES[theme][1][0]
    kb.add_knowledge_graph([NodeInput(name=f"{name} II", type="Thing")],
                           [EdgeInput(source=f"{name} II", target=name, type="NEAR")])
    kb.communities.build("default")  # the community gained a member: the report is kept but stale
    stale = next(c for c in kb.store.communities("default") if c.title == f"The {theme} theme")
    assert (stale.author, stale.stale) == ("host", True)
    assert stale.id in {c.id for c in kb.communities.to_write("default", limit=10).communities}


ALPHA = [f"Alpha {i}" for i in range(1, 6)]
BETA = [f"Beta {i}" for i in range(1, 6)]


def cliques(*groups: list[str]) -> list[EdgeInput]:
    return [EdgeInput(source=a, target=b, type="LINKS")
            for group in groups for a, b in itertools.combinations(group, 2)]


@pytest.fixture
def groups(db_path: Path):
    """Two groups of five entities, each related to all of its own, one weak link between: two communities. No
    background rebuild (each test builds when it means to); the hashing embedder (instant)."""
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.communities.keeper.stop()
        kb.add_knowledge_graph([NodeInput(name=n, type="Thing") for n in ALPHA + BETA], cliques(ALPHA, BETA) + [
            EdgeInput(source="Alpha 1", target="Beta 1", type="LINKS", weight=0.1)])
        kb.communities.build("default")
        yield kb


def holding(kb: KnowledgeBase, name: str) -> CommunityRecord:
    """The community (level 0) of entity `name`, as the store holds it."""
    node = kb.store.find_nodes("default", {name.casefold()})[0].id
    return next(c for c in kb.store.communities("default") if c.level == 0 and node in c.members)


def member_names(kb: KnowledgeBase, community: CommunityRecord) -> list[str]:
    return sorted(n.name for n in kb.store.get_nodes(community.members))


def test_a_written_report_stays_stale_on_the_community_that_holds_half_its_members(groups):
    kb = groups
    kb.communities.save_written("default", holding(kb, "Alpha 1").id, "The Alpha group", "Written by the host.")
    # Alpha 4 and 5 move to the Beta group, two newcomers join Alpha 1-3: the community keeps 3 of the 5 members
    # its report was written for, and has 5 (Jaccard 3/7). Their links end (deleted, the facts the report was
    # written from would be gone, and the report with them: see test_communities_deleted_facts.py).
    kb.end_relations([EndRelationInput(source=a, target=b, type="LINKS")
                      for a, b in itertools.combinations(ALPHA, 2) if {a, b} & {"Alpha 4", "Alpha 5"}])
    gamma = ["Gamma 1", "Gamma 2"]
    kb.add_knowledge_graph([NodeInput(name=n, type="Thing") for n in gamma], cliques(ALPHA[:3] + gamma) + [
        EdgeInput(source=a, target=b, type="LINKS") for a in ALPHA[3:] for b in BETA])
    assert kb.communities.build("default").written_reports_dropped == 0
    written = [c for c in kb.store.communities("default") if c.author == "host"]
    assert [(c.title, c.stale) for c in written] == [("The Alpha group", True)]
    assert member_names(kb, written[0]) == sorted(ALPHA[:3] + gamma)
    # The build's entities, not those it was written for: what its readers and its next author see.
    assert sorted(e["name"] for e in written[0].details["entities"]) == sorted(ALPHA[:3] + gamma)
    assert written[0].id in {c.id for c in kb.communities.to_write("default").communities}


def test_a_build_counts_the_written_reports_no_community_holds_half_of(groups):
    kb = groups
    kb.communities.save_written("default", holding(kb, "Alpha 1").id, "The Alpha group", "Written by the host.")
    kb.curation.delete_entities(ALPHA[:3], "default")  # Alpha 4 and 5 are left: 2 of the 5 it was written for
    built = kb.communities.build("default")
    assert built.written_reports_dropped == 1 and built.communities == 2
    assert {c.author for c in kb.store.communities("default")} == {"extractive"}


def test_one_written_report_goes_to_one_community_and_a_community_takes_one():
    def community(members, ref=0, **report):
        return CommunityRecord(namespace="default", level=0, members=members, ref=ref, **report)

    split = community((1, 2, 3, 4), title="Split", summary="S", author="host", written_for=4)
    whole = community((5, 6, 7, 8), title="Whole", summary="S", author="host", written_for=4)
    absorbed = community((9, 10), title="Absorbed", summary="S", author="model", written_for=2)
    shrunk = community((11, 12), title="Shrunk", summary="S", author="host", written_for=5)  # 3 deleted since
    new = [community((1, 2, 20), 0), community((3, 4, 21), 1), community((5, 6, 7, 8, 9, 10), 2),
           community((11, 12), 3)]
    assert reuse_reports(new, [split, whole, absorbed, shrunk]) == [absorbed, shrunk]
    assert [(c.title, c.stale) for c in new] == [("Split", True), ("", False), ("Whole", True), ("", False)]


def test_a_reports_key_facts_of_equal_weight_are_the_newest_first(db_path: Path, minilm):
    # A log of decisions, each written after the one it revisits: of two facts of equal weight the older is the one
    # a later one superseded, and a report names only its first 6 facts (its summary, 3).
    chosen = ["Memcached", "RabbitMQ", "Redis", "Kafka", "Kubernetes", "ClickHouse", "PostgreSQL"]
    with knowledge_base(db_path, minilm) as kb:
        for technology in chosen:
            kb.add_knowledge_graph([NodeInput(name="Platform Team", type="Team"),
                                    NodeInput(name=technology, type="Technology")],
                                   [EdgeInput(source="Platform Team", target=technology, type="CHOSE")])
        kb.communities.build("default")
        [community] = [c for c in kb.store.communities("default") if c.level == 0]
        newest = [f"Platform Team chose {technology}" for technology in reversed(chosen)]
        assert community.details["facts"] == newest[:6]
        assert f"Facts: {'; '.join(newest[:3])}." in community.summary


def test_after_a_build_that_found_no_relation_global_search_says_so(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Lonely", type="Thing"), NodeInput(name="Alone", type="Thing")], [])
        assert kb.communities.global_search("main themes", "default").hint == NO_COMMUNITIES
        assert kb.communities.build("default").communities == 0
        found = kb.communities.global_search("main themes", "default")
        assert found.hint == found.text == NO_RELATIONS and "build_communities" not in NO_RELATIONS


def test_deleted_and_merged_entities_leave_their_communities_here_as_in_a_fresh_process(db_path: Path, groups):
    def reports(kb: KnowledgeBase) -> dict[str, tuple[int, bool, list[str]]]:
        found = kb.communities.global_search("Alpha Beta", "default", level=0, token_budget=10_000).reports
        return {r.title.split(",")[0]: (r.size, r.stale, sorted(e.name for e in r.key_entities)) for r in found}

    kb = groups
    assert reports(kb)["Alpha 1"] == (5, False, ALPHA)  # read before the writes, by this process
    kb.curation.delete_entities(["Alpha 4"], "default")
    kb.curation.merge_entities(["Alpha 5"], "Beta 1", "default")
    here = reports(kb)
    # Their extractive reports are written again for the members they have now: not stale (Beta 1 took Alpha 5's
    # facts in the merge, an entity Beta's report names changed since the build).
    assert here == {"Alpha 1": (3, False, ALPHA[:3]), "Beta 1": (5, False, BETA)}
    assert holding(kb, "Alpha 1").id in {c.id for c in kb.communities.to_write("default").communities}
    kb.communities.save_written("default", holding(kb, "Alpha 1").id, "The Alpha group", "Written after.")
    assert not holding(kb, "Alpha 1").stale  # written for the members it has now
    kb.curation.delete_entities(ALPHA[:2], "default")
    here = reports(kb)
    text = kb.communities.global_search("Alpha Beta", "default", level=0, token_budget=10_000).text
    assert "Written after." not in text and "The Alpha group" not in text and WITHHELD in text  # it may name them
    kb.close()
    with knowledge_base(db_path, HashingEmbedder()) as fresh:
        assert reports(fresh) == here == {"Alpha 3": (1, True, ["Alpha 3"]), "Beta 1": (5, False, BETA)}
        fresh.communities.keeper.stop()
        fresh.curation.delete_entities(["Alpha 3", *BETA], "default")
        assert fresh.communities.global_search("Alpha Beta", "default").hint == NONE_LEFT


def test_the_ollama_model_writes_reports_validated_and_retried(db_path, minilm):
    good = json.dumps({"title": "Classical composers", "summary": "Composers of the classical era who influenced "
                                                                  "each other, from Bach to Brahms."})
    with FakeOllama(chat_replies=['{"title": "x"}', good]) as server:
        extractor = OllamaExtractor("qwen3:8b", base_url=server.base_url, max_attempts=2)
        with knowledge_base(db_path, minilm, extractor=extractor) as kb:
            kb.add_knowledge_graph(*planted_graph({"music": THEMES["music"]}))
            kb.communities.build("default")
            written = kb.communities.write_with_model("default", limit=1)
            total = len(kb.store.communities("default"))
            assert (written.written, written.failed, written.remaining) == (1, [], total - 1)
            chats = server.requests_to("/api/chat")
            assert len(chats) == 2  # the first reply lacked the summary: shown to the model, answered again
            assert chats[0]["body"]["format"]["required"] == ["title", "summary"]
            assert "Mozart" in chats[0]["body"]["messages"][1]["content"]
            assert "invalid" in chats[1]["body"]["messages"][-1]["content"]
            reports = kb.communities.global_search("classical composers", "default").reports
            assert ("Classical composers", "model") in {(r.title, r.author) for r in reports}

            server.add_chat_replies("not json", "still not json")
            kb.add_knowledge_graph([NodeInput(name="Salieri", type="Composer")],
                                   [EdgeInput(source="Salieri", target="Mozart", type="RIVALLED")])
            kb.communities.build("default")
            failed = kb.communities.write_with_model("default", limit=1)
            assert failed.written == 0 and "no valid report in 2 attempts" in failed.failed[0]


def test_without_an_extractor_model_reports_are_refused_with_what_to_do(kb):
    kb.communities.build("default")
    with pytest.raises(InvalidInputError, match="communities_to_summarize"):
        kb.communities.write_with_model("default")


def test_namespaces_never_mix(db_path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.add_knowledge_graph(*planted_graph({"music": THEMES["music"]}), namespace="a")
        kb.add_knowledge_graph(*planted_graph({"cooking": THEMES["cooking"]}), namespace="b")
        kb.communities.build("a")
        assert kb.communities.global_search("dishes", "b").hint == NO_COMMUNITIES
        kb.communities.build("b")
        for namespace, theme in (("a", "music"), ("b", "cooking")):
            reports = kb.communities.global_search("dishes and composers", namespace, token_budget=10_000).reports
            assert {theme_of(e.name) for r in reports for e in r.key_entities} == {theme}
            members = {m for c in kb.store.communities(namespace) for m in c.members}
            assert {n.namespace for n in kb.store.get_nodes(members)} == {namespace}


def test_export_and_import_carry_the_written_reports_onto_the_rebuilt_communities(tmp_path, db_path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.add_knowledge_graph(*planted_graph())
        kb.communities.build("default")
        groups = partition(kb)
        music = next(c for c in kb.store.communities("default") if c.level == 0 and "Mozart" in c.title + c.summary)
        kb.communities.save_written("default", music.id, "The Viennese classics", "Composers who shaped music.")
        with (tmp_path / "export.jsonl").open("w", encoding="utf-8") as out:
            assert export_jsonl(kb, out).community_reports == 1
    lines = [json.loads(line) for line in (tmp_path / "export.jsonl").read_text(encoding="utf-8").splitlines()]
    carried = [line for line in lines if line["kind"] == "community_report"]
    assert [(c["title"], c["author"], len(c["members"])) for c in carried] == [("The Viennese classics", "host", 8)]
    with knowledge_base(tmp_path / "copy.duckdb", minilm) as copy:
        assert import_file(copy, tmp_path / "export.jsonl").community_reports_restored == 1
        assert partition(copy) == groups
        written = [c for c in copy.store.communities("default") if c.author == "host"]
        assert [(c.title, c.stale, c.details["entities"] != []) for c in written] == [
            ("The Viennese classics", False, True)]
        assert copy.communities.global_search("Viennese classics", "default").reports[0].title == (
            "The Viennese classics")


def test_an_import_refuses_a_report_of_unknown_members_and_writes_nothing(tmp_path, minilm):
    lines = ['{"kind":"meta","format":"duckgraph","version":1}',
             '{"kind":"node","id":1,"name":"Mozart","type":"Composer"}',
             '{"kind":"community_report","level":0,"members":[1,2],"title":"T","summary":"S","author":"host"}']
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with knowledge_base(tmp_path / "copy.duckdb", minilm) as copy:
        with pytest.raises(InvalidInputError, match="bad.jsonl:3: members must be ids of node lines before it"):
            import_file(copy, tmp_path / "bad.jsonl")
        assert copy.store.find_nodes("default", {"mozart"}) == []


def partition(kb: KnowledgeBase) -> list[list[str]]:
    """Each community's member names, sorted: comparable across files, whose ids differ."""
    found = kb.store.communities("default")
    names = {n.id: n.name for n in kb.store.get_nodes({m for c in found for m in c.members})}
    return sorted(sorted(names[m] for m in c.members) for c in found)


def test_the_leiden_detector_is_registered_through_register_community_detectors(plugin_manager):
    assert "leiden" in factories(plugin_manager, "community_detector")
    detector = create(plugin_manager, "community_detector", "leiden", max_cluster_size=4)
    assert detector.id == "leiden:max_cluster_size=4,resolution=1"
    # Two triangles joined by one weak edge: two communities, split no finer than 4 members.
    found = detector.detect([1, 2, 3, 4, 5, 6, 3], [2, 3, 1, 5, 6, 4, 4], [1, 1, 1, 1, 1, 1, 0.1])
    final = {}
    for membership in found:
        if membership.final:
            final.setdefault(membership.cluster, set()).add(membership.node)
    assert sorted(map(sorted, final.values())) == [[1, 2, 3], [4, 5, 6]]
    assert detector.detect([1], [1], [1.0]) == []


@pytest.fixture
def no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` in this process with no user config and no DUCKGRAPH_* variables."""
    import os

    for name in [n for n in os.environ if n.startswith("DUCKGRAPH_")]:
        monkeypatch.delenv(name)
    (tmp_path / "config.toml").write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(tmp_path / "config.toml"))


def test_the_build_command_prints_no_empty_fields(no_settings, db_path, capsys, minilm):
    from duckgraph.core.cli import main

    with KnowledgeBase(DuckDBStore(db_path), minilm) as kb:  # communities refuses a file not there
        kb.add_knowledge_graph([NodeInput(name="Lonely", type="Thing")], [])  # and a namespace that holds nothing
    assert main(["communities", "build", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "communities: 0" in out and "None" not in out  # "sampling: None": only MCP sampling writes it


@pytest.mark.parametrize("action", ["build", "write"])
def test_build_and_write_refuse_a_query_rather_than_ignoring_it(no_settings, db_path, capsys, action):
    from duckgraph.core.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["communities", action, "main themes", "--db", str(db_path)])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"duckgraph communities: error: communities {action} takes no query ('main themes'): only search does\n")
    assert not db_path.exists()
