"""Community reports' distinctive terms, and the level global_search chooses by default."""

from duckgraph.core.domain.communities.global_search import asks_what_changed, choose_level, is_specific, topical
from duckgraph.core.domain.communities.terms import distinctive_terms
from duckgraph.ports.communities import CommunityRecord


def community(ref: int, level: int, members: range, leaf: bool = True, **report) -> CommunityRecord:
    return CommunityRecord(namespace="default", level=level, members=tuple(members), leaf=leaf, ref=ref, id=ref,
                           **report)


def test_a_coarse_community_carries_the_recurring_words_of_every_theme_it_holds():
    names = {i: f"kubernetes node {i}" for i in range(1, 6)} | {i: f"postgres replica {i}" for i in range(6, 11)}
    names |= {i: f"invoice {i}" for i in range(11, 16)} | {16: "node lonely"}
    found = [community(0, 0, range(1, 11), leaf=False), community(1, 0, range(11, 17)),
             community(2, 1, range(1, 6)), community(3, 1, range(6, 11))]
    terms = distinctive_terms(found, names)
    # Each number occurs once, and "node" is in both communities of level 0: neither tells this one apart.
    assert sorted(terms[0]) == ["kubernetes", "postgres", "replica"]
    assert terms[1] == ["invoice"]
    assert sorted(terms[2]) == ["kubernetes", "node"] and sorted(terms[3]) == ["postgres", "replica"]
    assert distinctive_terms(found, names, k=1)[0] in (["kubernetes"], ["postgres"], ["replica"])


def test_the_default_level_is_the_finest_where_what_the_query_needs_fits_the_budget():
    found = [community(0, 0, range(1, 21), leaf=False, title="A", summary="word " * 50),
             community(1, 1, range(1, 11), title="B", summary="word " * 50),
             community(2, 1, range(11, 21), title="C", summary="word " * 50)]
    assert choose_level(found, 10_000, set()) == 1  # everything fits: the finest
    assert choose_level(found, 100, set()) == 0  # a broad question, one report fits: the coarsest covers all
    assert choose_level(found, 100, {2}) == 1  # one relevant report at the finest level: it fits
    assert choose_level(found, 100, {0, 1, 2}) == 0  # relevant at level 1 twice (too much): level 0 gathers it
    assert choose_level(found, 10, {2}) == 0  # nothing fits: the coarsest


def test_a_question_is_broad_by_its_words_not_by_how_similar_the_reports_are():
    # A word matching a report, or one word naming a topic, makes it specific (its vector then ranks the reports),
    # however weakly similar they are; only words about the memory as a whole leave it broad (largest first).
    assert is_specific("main themes", {2: 1.5})  # a report names a film's "main theme"
    for query in ("What do we know about the garden?", "What's going on with our children?", "tomatoes",
                  "Give me an overview of everything related to the kids"):
        assert is_specific(query, {}), query
    for query in ("What are the main themes?", "Summarise what we know", "Give me an overview", "What is in here?",
                  "What topics does the memory cover?"):
        assert not is_specific(query, {}), query


def test_words_that_say_how_to_answer_name_no_topic():
    for query in ("What are the main themes? Answer in detail please", "Briefly, give me an overview",
                  "Summarise what we know, thanks, a detailed reply"):
        assert not is_specific(query, {}) and topical(query) == "", query
    assert is_specific("What are the main themes of the garden? Answer briefly", {})


def test_the_keyword_query_keeps_the_topic_only():
    # "going" stems to "go": matched by a report about the programming language Go, it ranked that one first.
    assert topical("What's going on with the kids?") == "kids?"
    assert topical("What data do I have about my children?") == "children?"
    assert topical("main-theme of the film") == "main-theme film"  # a joined run stays unless all of it is broad


def test_a_question_about_what_changed_is_told_apart_from_one_about_a_topic():
    for query in ("What changed this month?", "What happened last week?", "Anything new?", "What changed recently?",
                  "What was added yesterday?", "What changed on Monday?"):
        assert asks_what_changed(query), query
    for query in ("What happened at work?", "What are the main themes?", "What did I do last week?",
                  "What changed in the payments team?", "Tell me everything"):
        assert not asks_what_changed(query), query


def test_an_extractive_summary_ends_each_sentence_once():
    from collections import Counter

    from duckgraph.core.domain.communities.reports import _summary

    details = {"terms": ["rollout"], "entities": [{"name": "Ana", "type": "Person", "description": "Runs experiments."},
                                                  {"name": "Lab", "type": "Place", "description": ""}],
               "facts": ["Ana works at Lab: since May.", "Ana leads Lab"]}
    text = _summary(2, Counter({"Person": 1, "Place": 1}), details)
    assert ".." not in text
    assert text.endswith("Facts: Ana works at Lab: since May.; Ana leads Lab.")
    details["facts"] = ["Ana leads Lab: a long story."]
    assert _summary(2, Counter({"Person": 2}), details).endswith("Facts: Ana leads Lab: a long story.")
