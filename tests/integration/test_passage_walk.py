"""Passage ranking by a walk over entities and passages (real DuckDB file, the real default model).

The set-up is a two-hop question: "Where did the singer of Hello Love die?" The passage that answers the second
hop ("Hank Snow ... Madison") shares almost no word with the question; distractor passages share many.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from duckgraph.core.domain import passage_ranking
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore

QUESTION = "Where did the singer of Hello Love die?"


def document(doc_id: str, text: str) -> DocumentInput:
    return DocumentInput(id=doc_id, title=doc_id, text=text)


def entity(name: str, *sources: str) -> NodeInput:
    return NodeInput(name=name, type="Entity", source_ids=list(sources))


pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def kb(tmp_path_factory, minilm):
    knowledge_base = KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("walk") / "kb.duckdb"), minilm)
    with knowledge_base:
        knowledge_base.add_documents([
            document("song", "Hello Love is a country song recorded by Hank Snow in 1974."),
            document("bridge", "Hank Snow spent his last years at his ranch in Madison, Tennessee."),
            *(document(f"distractor{i}", f"Where did the singer go? Love songs never die, said singer number {i}.")
              for i in range(6)),
            *(document(f"usa{i}", f"The United States report {i} lists statistics and numbers.") for i in range(8)),
        ])
        knowledge_base.add_knowledge_graph(
            [entity("Hello Love", "song"), entity("Hank Snow", "song", "bridge"), entity("Madison", "bridge"),
             entity("United States", *(f"usa{i}" for i in range(8)), "song")],
            [EdgeInput(source="Hello Love", target="Hank Snow", type="RECORDED_BY", source_ids=["song"]),
             EdgeInput(source="Hank Snow", target="Madison", type="LIVED_IN", source_ids=["bridge"])],
        )
        yield knowledge_base


def dense_rank(kb, document_id: str) -> int:
    hits = kb.store.vector_search("chunk", kb.embedder.embed_query(QUESTION), 100, kb.namespace)
    order = {c: i for i, (c, _) in enumerate(hits)}
    chunks = sorted(kb.store.get_chunks([c for c, _ in hits]), key=lambda c: order[c.id])
    documents = [c.document_id for c in chunks]
    return documents.index(document_id)


def test_the_bridge_passage_is_found_although_dense_ranks_it_low(kb) -> None:
    assert dense_rank(kb, "bridge") >= 3  # the set-up: cosine alone does not find it
    result = kb.search(QUESTION, max_passages=3)
    found = [p.document_id for p in result.passages]
    assert "song" in found and "bridge" in found


def test_without_the_walk_the_bridge_passage_is_missed(kb) -> None:
    result = kb.search(QUESTION, max_passages=3, fact_seeds=0, name_seed_weight=0.0, bridge_seeds=0)
    assert "bridge" not in [p.document_id for p in result.passages]


def test_the_entity_the_first_walk_reaches_most_seeds_a_second_walk(kb) -> None:
    """Without fact or name seeds the walk starts from the passages nearest the question only: the song's passage
    leads it to Hank Snow, which then seeds a second walk that reaches the passage about him."""
    result = kb.search(QUESTION, max_passages=3, fact_seeds=0, name_seed_weight=0.0)
    assert "bridge" in [p.document_id for p in result.passages]


def test_the_facts_of_the_entity_the_question_names_seed_the_walk(kb) -> None:
    """"Hello Love" is named: its fact nearest the question leads to Hank Snow, although the question's nearest
    entities are not searched for facts (fact_seed_nodes=0) and neither names nor bridges seed the walk."""
    result = kb.search(QUESTION, max_passages=3, fact_seed_nodes=0, name_seed_weight=0.0, bridge_seeds=0)
    assert "bridge" in [p.document_id for p in result.passages]
    without = kb.search(QUESTION, max_passages=3, fact_seed_nodes=0, name_seed_weight=0.0, bridge_seeds=0,
                        facts_per_name=0)
    assert "bridge" not in [p.document_id for p in without.passages]


def test_an_entity_many_passages_mention_spreads_thin(kb) -> None:
    """"United States" is named in the question and mentioned by nine passages: none of them outranks the
    bridge passage, which the rarer "Hank Snow" leads to."""
    result = kb.search("Where did the singer of Hello Love die in the United States?", max_passages=3)
    found = [p.document_id for p in result.passages]
    assert "bridge" in found
    assert sum(d.startswith("usa") for d in found) <= 1


def test_at_most_one_passage_per_document_while_others_qualify(tmp_path, minilm) -> None:
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        long_text = " ".join(f"Hank Snow sang song number {i} on the radio." for i in range(150))
        kb.add_documents([document("long", long_text), document("short", "Hank Snow was a singer."),
                          document("other", "A singer sang on the radio.")])
        assert len(kb.store.document_chunks(kb.namespace, ["long"])) > 2
        result = kb.search("Hank Snow sang on the radio", max_passages=3)
        assert sorted(p.document_id for p in result.passages) == ["long", "other", "short"]


def test_passage_scores_are_absolute_and_sorted(kb) -> None:
    scores = [p.score for p in kb.search(QUESTION, max_passages=5).passages]
    # The best passage scores the best passage-to-query cosine, so scores compare across queries.
    [(_, best)] = kb.store.vector_search("chunk", kb.embedder.embed_query(QUESTION), 1, kb.namespace)
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(best, abs=1e-4) and best < 1
    unrelated = [p.score for p in kb.search("recipe for sourdough bread with rye flour", max_passages=5).passages]
    assert max(unrelated, default=0.0) < scores[0]  # the relevance floor may leave nothing


def test_walk_knobs_are_validated_like_other_options(kb) -> None:
    from duckgraph.ports import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown search options: walk_speed"):
        kb.search(QUESTION, walk_speed=3)


def test_facts_are_sought_among_those_of_the_entities_nearest_the_query(kb, monkeypatch) -> None:
    searched = []
    search = kb.store.vector_search
    monkeypatch.setattr(kb.store, "vector_search", lambda kind, *args: searched.append(kind) or search(kind, *args))
    # Without name seeds only the facts' ends lead to the bridge passage.
    found = [p.document_id for p in kb.search(QUESTION, max_passages=3, name_seed_weight=0.0).passages]
    assert "bridge" in found
    assert "edge" not in searched  # no search over every fact's vector
    without = kb.search(QUESTION, max_passages=3, name_seed_weight=0.0, fact_seed_nodes=0, facts_per_name=0,
                        bridge_seeds=0).passages
    assert "bridge" not in [p.document_id for p in without]


def test_the_parts_of_a_seed_s_name_lead_to_their_own_passages(tmp_path, minilm, monkeypatch) -> None:
    """The passage about Meehan Bonnar names his birthplace "Fredericton, New Brunswick"; the passage about the city
    names "Fredericton", the one about the province "New Brunswick": three entities, no fact between them. The
    birthplace is a seed (the far end of the named entity's fact nearest the question), and each part of its name
    leads the walk to the passage about it. Without bridges: in a memory this small they reach every passage."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            document("bonnar", "Meehan Bonnar, born in Fredericton, New Brunswick, played ice hockey for Boston."),
            document("city", "The Saint John valley and its bridges are the heart of Fredericton."),
            document("province", "New Brunswick entered the Confederation in 1867 together with Nova Scotia."),
            *(document(f"river{i}", f"Which river flows where? River guide {i} lists rivers and their births.")
              for i in range(6)),
            *(document(f"join{i}", f"When did the province join Canada? Report {i}: provinces joined at birth.")
              for i in range(6)),
        ])
        kb.add_knowledge_graph(
            [entity("Meehan Bonnar", "bonnar"), entity("Fredericton, New Brunswick", "bonnar"),
             entity("Fredericton", "city"), entity("Saint John", "city"), entity("New Brunswick", "province"),
             entity("Nova Scotia", "province")],
            [EdgeInput(source="Meehan Bonnar", target="Fredericton, New Brunswick", type="BORN_IN",
                       source_ids=["bonnar"]),
             EdgeInput(source="Saint John", target="Fredericton", type="FLOWS_THROUGH", source_ids=["city"]),
             EdgeInput(source="New Brunswick", target="Nova Scotia", type="JOINED_WITH", source_ids=["province"])],
        )
        questions = {"city": "Which river flows through the birthplace of Meehan Bonnar?",
                     "province": "When did the province where Meehan Bonnar was born join Canada?"}

        def found(question: str) -> list[str]:
            return [p.document_id for p in kb.search(question, max_passages=3, bridge_seeds=0).passages]

        # First the walk's passages, or the distractor nearest the question's words and then them
        # (`_led_by_best_match`).
        for answer, question in questions.items():
            shown = found(question)
            assert shown[-2:] == ["bonnar", answer] or shown[:2] == ["bonnar", answer], (question, shown)
        monkeypatch.setattr(passage_ranking, "_with_name_parts", lambda store, seeds, namespace: seeds)
        for answer, question in questions.items():
            assert answer not in found(question), (question, found(question))


def test_a_proper_name_inside_a_seed_s_name_leads_to_its_passages(tmp_path, minilm, monkeypatch) -> None:
    """The passage about Shringarpur names "Maharashtra state", the one about the state's politics "Maharashtra":
    the name inside the seed's name leads the walk to it, past passages that share the question's words."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            document("village", "Shringarpur is a small village in Ratnagiri district, Maharashtra state, India."),
            document("state", "The politics of Maharashtra have been dominated by the Indian National Congress."),
            *(document(f"charge{i}", f"Who was in charge of the state? Record {i} names the officers in charge.")
              for i in range(8)),
        ])
        kb.add_knowledge_graph(
            [entity("Shringarpur", "village"), entity("Maharashtra state", "village"),
             entity("Ratnagiri district", "village"), entity("Maharashtra", "state"),
             entity("Indian National Congress", "state")],
            [EdgeInput(source="Shringarpur", target="Maharashtra state", type="LOCATED_IN", source_ids=["village"]),
             EdgeInput(source="Shringarpur", target="Ratnagiri district", type="LOCATED_IN", source_ids=["village"]),
             EdgeInput(source="Indian National Congress", target="Maharashtra", type="DOMINATED",
                       source_ids=["state"])],
        )

        def found() -> list[str]:
            question = "Who was in charge of the state where Shringarpur is located?"
            return [p.document_id for p in kb.search(question, max_passages=3, bridge_seeds=0).passages]

        # First the walk's passages, or the distractor nearest the question's words and then them
        # (`_led_by_best_match`).
        assert found()[-2:] == ["village", "state"] or found()[:2] == ["village", "state"], found()
        monkeypatch.setattr(passage_ranking, "_name_parts", lambda name: [])
        assert "state" not in found(), found()


def test_the_chunks_next_to_a_shown_passage_follow_it(tmp_path, minilm, monkeypatch) -> None:
    """A long page is cut into chunks: the one on Seattle's snow is shown, and the figure it leaves to the chunk
    before it (filled with words far from the question) follows among the passages ranked next, ahead of a dozen
    passages nearer the question than that chunk."""
    filler = " ".join(f"Archive entry {i} lists the municipal records kept on file." for i in range(20))
    snow = " ".join(["Snow falls in Seattle in winter, and the city sees snowfall most winters."] * 6)
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            document("seattle", f"The yearly figure is 6.8 inches. {filler} {snow}"),
            *(document(f"winter{i}", f"Snow falls in winter in town number {i}; snowfall is measured.")
              for i in range(12)),
        ])
        chunks = kb.store.document_chunks(kb.namespace, ["seattle"])
        assert len(chunks) == 2 and "6.8 inches" in chunks[0].text and "6.8" not in chunks[1].text

        def search() -> tuple[list[str], str]:
            result = kb.search("How much snow falls in Seattle in winter?", max_passages=3)
            return [p.chunk_id for p in result.passages], result.text

        shown, text = search()
        assert chunks[1].id in shown and chunks[0].id not in shown and "6.8 inches" in text
        monkeypatch.setattr(passage_ranking, "_with_adjacent",
                            lambda store, best, next_ones, left_out, namespace, options: next_ones)
        assert "6.8 inches" not in search()[1]


def test_the_reply_to_a_matching_turn_is_shown(tmp_path, minilm) -> None:
    """A chat kept one turn per document, each session's turns under its title, a minute apart on its day: the
    question's words match the turn that asks about the gym, the answer is in the reply (which shares no word with
    the question), ahead of other sessions' turns about climbing that are nearer the question than the reply is.
    With `reply_share` 0 the reply is not among the passages."""
    sessions = {
        "Session 1, 3 March 2026": ["Maya: Did you go to the climbing gym with your brother on Saturday?",
                                    "Omar: Yes! Four tries, but I made it to the top of the purple wall."],
        "Session 2, 9 March 2026": ["Maya: I want to try climbing at a gym some day.",
                                    "Omar: Climbing gyms are fun on weekends.",
                                    "Maya: My brother climbs at a gym too."],
        "Session 3, 15 March 2026": ["Omar: I baked bread this morning.", "Maya: Nice, what kind?"],
    }
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([DocumentInput(id=f"s{s}t{t}", title=title, text=text,
                                        time=f"2026-03-{6 * s - 3:02d}T19:{t:02d}:00")
                          for s, (title, turns) in enumerate(sessions.items(), 1) for t, text in enumerate(turns, 1)])
        question = "Did Omar go to the climbing gym with his brother on Saturday?"

        def shown(**options) -> list[str]:
            return [p.document_id for p in kb.search(question, max_passages=4, **options).passages]

        dense = [kb.store.chunk_documents([c])[c] for c, _ in kb.store.vector_search(
            "chunk", kb.embedder.embed_query(question), 10, kb.namespace)]
        assert dense[0] == "s1t1" and dense.index("s1t2") >= 3, dense
        assert "s1t2" in shown(), shown()
        assert "s1t2" not in shown(reply_share=0), shown(reply_share=0)
        # Asked as of the minute of the question, before the reply was given: the reply is not lifted into view.
        asked = datetime(2026, 3, 3, 19, 1, 30)
        assert "s1t2" not in shown(as_of=asked), shown(as_of=asked)


@pytest.mark.parametrize(("answered", "lifted"), [("2026-11-20T09:05:00", True), ("2026-11-25T15:00:00", False)],
                         ids=["five minutes later", "five days later"])
def test_a_document_of_the_same_title_is_a_reply_only_within_one_sitting(tmp_path, minilm, answered, lifted) -> None:
    """Two emails of one subject line stored one after the other, the second sharing no word with the question:
    written five minutes after the first, it reads as its reply and is shown ahead of notes nearer the question;
    written five days later (another sender's email of a common subject), it is not lifted as one."""
    notes = ["Parking at the Clarendon garage costs 12 pounds a day.", "The garage permit office opens at nine.",
             "Permits for the staff car park are renewed every January.",
             "Visitors need a parking permit from the front desk.", "The Clarendon garage closes at midnight."]
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            DocumentInput(id="mail:a", title="Quick question", time="2026-11-20T09:00:00",
                          text="From: Dana (HR). Do you still need the parking permit for the Clarendon garage? It "
                               "expires on December 31."),
            DocumentInput(id="mail:b", title="Quick question", time=answered,
                          text="From: Zoë Müller (Acme). No, we cancelled it last month. The invoice for the renewal "
                               "can be ignored."),
            *(document(f"note{i}", text) for i, text in enumerate(notes))])
        question = "Do I still need the parking permit for the Clarendon garage?"
        dense = [kb.store.chunk_documents([c])[c] for c, _ in kb.store.vector_search(
            "chunk", kb.embedder.embed_query(question), 10, kb.namespace)]
        assert dense[0] == "mail:a" and dense.index("mail:b") >= 4, dense
        shown = [p.document_id for p in kb.search(question, max_passages=4).passages]
        assert ("mail:b" in shown) is lifted, shown


def test_the_passage_that_matches_the_question_best_comes_first(tmp_path, minilm) -> None:
    """A team memory: a runbook stored as a document, and a graph written from other notes. The walk favours the
    passages about many of the named entity's neighbours; the runbook, which states the asked setting in the
    question's words, came last of four. It leads now, scored its similarity; the architecture note comes next,
    scored its own similarity, not the runbook's."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            document("runbook", "Connection pooling. pgbouncer runs in transaction mode in front of orders-db. Its "
                                "max_client_conn is 800 and default_pool_size is 40; raise them together."),
            document("architecture", "The Checkout Service talks to orders-db through pgbouncer. The Platform Team "
                                     "owns pgbouncer and orders-db. Lena Fischer leads the Platform Team."),
            document("oncall", "The Platform Team is on call for pgbouncer incidents this quarter; pages go to Lena "
                               "Fischer first."),
            document("incident", "INC-142: checkout errors for 20 minutes when pgbouncer restarted during a deploy "
                                 "of the Checkout Service."),
        ])
        kb.add_knowledge_graph(
            [entity("pgbouncer", "architecture", "oncall", "incident"), entity("orders-db", "architecture"),
             entity("Checkout Service", "architecture", "incident"), entity("Platform Team", "architecture", "oncall"),
             entity("Lena Fischer", "architecture", "oncall")],
            [EdgeInput(source="Checkout Service", target="pgbouncer", type="USES", source_ids=["architecture"]),
             EdgeInput(source="pgbouncer", target="orders-db", type="FRONTS", source_ids=["architecture"]),
             EdgeInput(source="Platform Team", target="pgbouncer", type="OWNS", source_ids=["architecture"])],
        )
        question = "What is max_client_conn set to on pgbouncer?"
        passages = kb.search(question, max_passages=4).passages
        query = kb.embedder.embed_query(question)
        hits = kb.store.vector_search("chunk", query, 4, kb.namespace)
        chunks = {c.id: c for c in kb.store.get_chunks([chunk_id for chunk_id, _ in hits])}
        own = {chunks[chunk_id].document_id: similarity for chunk_id, similarity in hits}
        assert [p.document_id for p in passages][:2] == ["runbook", "architecture"]
        assert passages[0].score == pytest.approx(max(own.values()), abs=1e-4)
        assert passages[1].score == pytest.approx(own["architecture"], abs=1e-4)
        assert passages[1].score < passages[0].score
        assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)


def test_a_passage_stored_twice_is_shown_once_and_names_the_other(tmp_path, minilm) -> None:
    """A notes file ingested twice (a copy, "notes (1).md", in a backup folder), one copy under a heading: its
    passage was shown from both documents in turn, the same text read twice in the room of another. It is shown
    once, naming the copy (`also_in`, and in the text); the next passage takes the freed place; both documents stay
    stored."""
    text = "The staging database is backed up every night at 02:00 to the eu-west bucket, kept for 30 days."
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([
            document("notes.md", text),
            document("backup/notes (1).md", f"# Backups\n\n{text}"),
            document("restore.md", "To restore the staging database, fetch the nightly dump from the bucket."),
            document("lunch.md", "The team lunch is on Friday at the Thai place."),
        ])
        copy = kb.store.document_chunks(kb.namespace, ["backup/notes (1).md"])
        assert len(copy) == 1 and copy[0].text == text and copy[0].section == "Backups"  # the set-up
        result = kb.search("When is the staging database backed up?", max_passages=2)
        assert [p.document_id for p in result.passages] == ["notes.md", "restore.md"]
        assert result.passages[0].also_in == [f"backup/notes (1).md#{copy[0].id}"]
        assert result.passages[1].also_in == []
        assert f"(also in [backup/notes (1).md#{copy[0].id}])" in result.text
        assert result.text.count("02:00") == 1
        assert {c.document_id for c in kb.store.document_chunks(kb.namespace, ["notes.md", "backup/notes (1).md"])} \
            == {"notes.md", "backup/notes (1).md"}


def _decision_log(kb: KnowledgeBase) -> None:
    """Architecture decisions, one document each: the entities are those the decisions name."""
    kb.add_documents([
        DocumentInput(id="adr-4", title="ADR-4: Authentication", text=(
            "We will build our own auth-service issuing JWTs. Auth0 was rejected because of per-user pricing at our "
            "projected scale; Keycloak was rejected because of its operational burden and Java footprint.")),
        DocumentInput(id="adr-9", title="ADR-9: Orchestration", text=(
            "Autoscaling, self-healing and uniform deployments. Nomad was rejected for its smaller ecosystem.")),
        DocumentInput(id="adr-12", title="ADR-12: GraphQL gateway", text="Rejected. We keep REST behind api-gateway."),
        DocumentInput(id="adr-12-status", title="ADR-12: GraphQL gateway",
                      text="Status: Rejected\nDate: 2024-06-10\nDeciders: Maya Chen"),
        DocumentInput(id="adr-10-status", title="ADR-10: Observability",
                      text="Status: Accepted\nDate: 2024-01-22\nSupersedes: ADR-5"),
        DocumentInput(id="adr-1-status", title="ADR-1: Monorepo", text="Status: Accepted\nDate: 2022-03-10"),
    ])
    kb.add_knowledge_graph([entity("auth-service", "adr-4"), entity("Auth0", "adr-4"), entity("Keycloak", "adr-4"),
                            entity("Nomad", "adr-9")], [])


@pytest.mark.parametrize("question", ["Why was Keycloak rejected?", "Why was Nomad rejected?"])
def test_a_short_passage_that_shares_only_a_common_word_does_not_lead(tmp_path, minilm, question) -> None:
    """Another decision's one line, "Rejected. We keep REST behind api-gateway.", names none of the question's
    entities: its words and the feedback of passages like it (`_with_feedback`) led the passage that names the
    rejected tool, and at a small budget it was the only one shown."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        _decision_log(kb)
        passages = kb.search(question, max_passages=3).passages
        named = "adr-4" if "Keycloak" in question else "adr-9"
        assert passages[0].document_id == named, [(p.document_id, p.score) for p in passages]


def test_a_passage_lifted_as_the_best_match_scores_its_own_similarity(tmp_path, minilm) -> None:
    """The passage led only as the best match (`_led_by_best_match`) shows its own cosine, not the best cosine of
    any passage (another passage's), and the walk's best after it its own."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        _decision_log(kb)
        query = kb.embedder.embed_query("Why was Keycloak rejected?")
        hits = kb.store.vector_search("chunk", query, 6, kb.namespace)
        chunks = {c.id: c for c in kb.store.get_chunks([chunk_id for chunk_id, _ in hits])}
        own = {chunks[chunk_id].document_id: similarity for chunk_id, similarity in hits}
        by_document = {c.document_id: c for c in chunks.values()}
        ranked = [(by_document["adr-12"], 2.0), (by_document["adr-4"], 1.0), (by_document["adr-9"], 0.5)]
        scores = passage_ranking._absolute_scores(kb.store, ranked, max(own.values()), True, query)
        assert own["adr-12"] < max(own.values())
        assert scores == pytest.approx([own["adr-12"], own["adr-4"], own["adr-4"] / 2], abs=1e-4)
