"""`duckgraph doctor` lists likely duplicate entities: names of one namespace that are one but for case, accents,
punctuation and spacing, or that look the same but use letters of other scripts, each group with the merge call
that fixes it. Near vectors alone ("K8s", "Kubernetes") are not its business: possible_duplicates reports them when
they are written. On a real DuckDB file, with Ollama's stand-in (tests/ollama_server.py) as the embedder."""

from __future__ import annotations

from pathlib import Path

from duckgraph.core import doctor as doctor_module
from duckgraph.core.cli import main
from duckgraph.core.doctor import DUPLICATES_LISTED
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder
from tests.integration.test_doctor import checks, doctor, env, use_ollama  # noqa: F401 (a fixture)
from tests.ollama_server import FakeOllama

CYRILLIC_MAYA = "M\u0430ya Chen"  # the second letter is U+0430 CYRILLIC SMALL LETTER A


def duplicate_warnings(report: dict) -> list[str]:
    return [w for w in report["warnings"] if w.startswith("possible duplicate entities")]


def test_doctor_lists_entities_named_alike_with_the_call_that_merges_them(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            # Given in one call, as distinct: resolution keeps them apart.
            kb.add_knowledge_graph([NodeInput(name="orders-db", type="Database"),
                                    NodeInput(name="orders_db", type="Database")], [])
            kb.add_knowledge_graph([NodeInput(name="Kubernetes", type="Technology"),
                                    NodeInput(name="K8s", type="Technology"),
                                    NodeInput(name="Maya Chen", type="Person")], [])
            kb.add_knowledge_graph([NodeInput(name="OrdersDB", type="Service"),
                                    NodeInput(name=CYRILLIC_MAYA, type="Person")], [])
            kb.add_knowledge_graph([NodeInput(name="Renée Dubois", type="Person"),
                                    NodeInput(name="Renee Dubois", type="Person")], [], namespace="work")
            # The same name in two namespaces is two memories' entities, not a duplicate.
            kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person")], [], namespace="work")
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
        assert code == 0, report  # a warning: the file works
        assert checks(report)["duplicates"] is True
        # OrdersDB, a Service, is likely another thing than the two Databases: listed apart, with no merge.
        assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
            "3 group(s) of likely duplicate entities (6 entities), below; 1 group(s) of entities named alike but of "
            "different types, likely different things of one name, so not offered as duplicates: 'orders-db' "
            "[Database], 'orders_db' [Database], 'OrdersDB' [Service] in namespace \"default\". If two of them are "
            "one thing, give them one type with update_entity, and doctor lists their merge"]
        assert duplicate_warnings(report) == [
            "possible duplicate entities: 3 group(s) of entities named alike but for case, accents, punctuation, "
            "spacing or look-alike letters of other scripts, or one named as another's alias, each likely one thing "
            "whose facts search and the reads split between them. If they are one, merge each group with the "
            "merge_entities tool (or \"Merge duplicates into this\" on the target's page in `duckgraph ui`); if not, "
            "rename one with update_entity: "
            "'orders-db', 'orders_db' [Database]: merge_entities(sources=[\"orders_db\"], target=\"orders-db\", "
            "namespace=\"default\") | "
            f"'Maya Chen', '{CYRILLIC_MAYA}' [Person] (looks the same as 'Maya Chen' but uses other letters (CYRILLIC "
            f"SMALL LETTER A for 'a')): merge_entities(sources=[\"{CYRILLIC_MAYA}\"], target=\"Maya Chen\", "
            "namespace=\"default\") | "
            "'Renée Dubois', 'Renee Dubois' [Person]: merge_entities(sources=[\"Renee Dubois\"], target=\"Renée "
            "Dubois\", namespace=\"work\")"]
        assert main(["doctor", "--db", str(db)]) == 0
        printed = capsys.readouterr().out
    assert "check duplicates: ok, 3 group(s) of likely duplicate entities (6 entities), below; 1 group(s)" in printed
    assert "warning:   possible duplicate entities: 3 group(s)" in printed and "no problems found" not in printed


def test_doctor_lists_a_name_in_markdown_emphasis_with_the_plain_name_as_the_target(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            # Stored first, the emphasised copy is still the source; asterisks that are part of a name stay.
            kb.add_knowledge_graph([NodeInput(name="**Alice**", type="Person"), NodeInput(name="Alice", type="Person"),
                                    NodeInput(name="*Bob*", type="Person"), NodeInput(name="C", type="Language"),
                                    NodeInput(name="C**", type="Language"), NodeInput(name="*nix", type="OS"),
                                    NodeInput(name="nix", type="OS")], [])
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0, report
    [warning] = duplicate_warnings(report)
    assert warning.endswith(
        "rename one with update_entity: '**Alice**', 'Alice' [Person] ('**Alice**' is 'Alice' in markdown emphasis): "
        "merge_entities(sources=[\"**Alice**\"], target=\"Alice\", namespace=\"default\")")


def test_doctor_lists_the_first_groups_and_counts_the_rest(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name=name, type="Service") for i in range(DUPLICATES_LISTED + 2)
                                    for name in (f"svc-{chr(97 + i)}", f"svc_{chr(97 + i)}")], [])
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    [warning] = duplicate_warnings(report)
    assert warning.count("merge_entities(") == DUPLICATES_LISTED
    assert warning.endswith("; and 2 more group(s)")


def test_a_file_without_entities_named_alike_has_no_duplicate_warning(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Kubernetes", type="Technology"),
                                    NodeInput(name="K8s", type="Technology"),
                                    NodeInput(name="Maya Chen", type="Person"),
                                    NodeInput(name="Maya Chan", type="Person")], [])
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0 and duplicate_warnings(report) == []
    assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
        "no two entities of a namespace are named alike but for case, accents, punctuation, spacing or look-alike "
        "letters, nor is one named as another's alias"]


def test_on_a_huge_file_doctor_compares_the_first_entities_and_says_so(env, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="orders-db", type="Database"),
                                    NodeInput(name="orders_db", type="Database"),
                                    NodeInput(name="Maya Chen", type="Person")], [])
            kb.add_knowledge_graph([NodeInput(name=CYRILLIC_MAYA, type="Person")], [], namespace="work")
        use_ollama(env, ollama.base_url)
        env.setattr(doctor_module, "DUPLICATES_SCANNED", 3)
        code, report = doctor(capsys, db)
    assert code == 0, report
    assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
        "1 group(s) of likely duplicate entities (2 entities) among the first 3 entities stored, below"]
    assert (report["store"]["duplicates"]["scanned"], report["store"]["duplicates"]["complete"]) == (3, False)


def test_doctor_lists_an_entity_named_as_another_s_alias(env, tmp_path: Path, capsys):
    """Renamed in one memory (the old name kept as an alias), imported into another that still has the old name:
    two entities, one named what the other has as an alias. Listed, with the renamed one as the target."""
    import io

    from duckgraph.core.files.export import export_jsonl
    from duckgraph.core.files.import_ import import_lines

    db, laptop = tmp_path / "kb.duckdb", tmp_path / "laptop.duckdb"
    with FakeOllama() as ollama:
        embedder = OllamaEmbedder(base_url=ollama.base_url)
        with KnowledgeBase(DuckDBStore(db), embedder) as kb:
            kb.add_knowledge_graph([NodeInput(name="Priya Raman", type="Person", description="Cyclist."),
                                    NodeInput(name="Tom Reyes", type="Person", aliases=["Tommy"])], [])
        with KnowledgeBase(DuckDBStore(laptop), embedder) as kb:
            kb.add_knowledge_graph([NodeInput(name="Priya Raman", type="Person", description="Lives in Lisbon.")], [])
            kb.curation.update_entity("Priya Raman", "default", new_name="Priya R. Raman")
            out = io.StringIO()
            export_jsonl(kb, out)
        with KnowledgeBase(DuckDBStore(db), embedder) as kb:
            import_lines(kb, out.getvalue().splitlines())
            assert sorted(n.name for n in kb.store.list_nodes("default")) == ["Priya R. Raman", "Priya Raman",
                                                                                "Tom Reyes"]
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0, report
    assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
        "1 group(s) of likely duplicate entities (2 entities), below"]
    [warning] = duplicate_warnings(report)
    assert warning.endswith(
        "'Priya Raman', 'Priya R. Raman' [Person] ('Priya R. Raman' has 'Priya Raman' as an alias): "
        "merge_entities(sources=[\"Priya Raman\"], target=\"Priya R. Raman\", namespace=\"default\")")


def test_entities_named_alike_of_different_types_are_listed_apart_without_a_merge(env, tmp_path: Path, capsys):
    """A Country "Jordan" and a Person "Jordan Lee" whose alias is "Jordan" are likely two things of one name: no
    merge is offered for them. One of type 'unknown' (a relation's placeholder end) says nothing of what it is."""
    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Jordan", type="Country"),
                                    NodeInput(name="Jordan Lee", type="Person", aliases=["Jordan"]),
                                    NodeInput(name="Apple", type="Organization"),
                                    NodeInput(name="**Apple**", type="Ingredient"),
                                    NodeInput(name="Apple.", type="organizations"),
                                    NodeInput(name="Acme-Corp", type="unknown"),
                                    NodeInput(name="Acme Corp", type="Company")], [])
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0, report
    assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
        "2 group(s) of likely duplicate entities (4 entities), below; 2 group(s) of entities named alike but of "
        "different types, likely different things of one name, so not offered as duplicates: 'Jordan' [Country], "
        "'Jordan Lee' [Person] ('Jordan Lee' has 'Jordan' as an alias) in namespace \"default\" | 'Apple' "
        "[Organization], '**Apple**' [Ingredient], 'Apple.' [organizations] in namespace \"default\". If two of "
        "them are one thing, give them one type with update_entity, and doctor lists their merge"]
    # Of one type (up to case and number), or one of them 'unknown': likely one thing, with the merge call.
    [warning] = duplicate_warnings(report)
    assert warning.endswith(
        "rename one with update_entity: 'Apple', 'Apple.' [Organization, organizations]: merge_entities(sources="
        "[\"Apple.\"], target=\"Apple\", namespace=\"default\") | 'Acme-Corp', 'Acme Corp' [Company, unknown]: "
        "merge_entities(sources=[\"Acme Corp\"], target=\"Acme-Corp\", namespace=\"default\")")
    assert "Jordan" not in warning


def test_doctor_lists_the_user_written_as_me_and_under_their_name_as_one_group(env, tmp_path: Path, capsys):
    """A model writes the user as "me", "I", "User" and as "Maria Santos" (described as the user) in different
    sessions: four entities no name rule joins, listed as one group merged into the user's name."""
    from duckgraph.core.domain.model import EdgeInput

    db = tmp_path / "kb.duckdb"
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Mom", type="Person"), NodeInput(name="me", type="Person")],
                                   [EdgeInput(source="Mom", target="me", type="MOTHER_OF")])
            kb.add_knowledge_graph([NodeInput(name="I", type="Person"), NodeInput(name="User", type="Person")], [])
            kb.add_knowledge_graph([NodeInput(name="Maria Santos", type="Person", description="The user")], [])
            kb.add_knowledge_graph([NodeInput(name="Ana", type="Person", description="Sister of the user")], [])
        use_ollama(env, ollama.base_url)
        code, report = doctor(capsys, db)
    assert code == 0, report
    assert [c["detail"] for c in report["checks"] if c["check"] == "duplicates"] == [
        "1 group(s) of likely duplicate entities (4 entities), below"]
    [warning] = duplicate_warnings(report)
    assert warning.endswith(
        "'Maria Santos', 'me', 'I', 'User' [Person] ('me', 'I', 'User' stand(s) for the user (English "
        "self-references); 'Maria Santos' says it is the user (its description or an alias)): "
        "merge_entities(sources=[\"me\", \"I\", \"User\"], target=\"Maria Santos\", namespace=\"default\")")
