"""The memory tools' read answers within a token bound: whole entities with their relations, one entity that alone
does not fit cut and said, and the note."""

from __future__ import annotations

import json

from duckgraph.core.domain.memory_pages import TEXT_TOKENS, Entry, fill, note
from duckgraph.core.domain.model import GraphEntity, GraphRelation
from duckgraph.core.domain.render import estimate_tokens

RELATION_IDS = iter(range(1, 1_000_000))


def entry(name: str, observations: int = 2, relations: int = 1, *, more: bool = False) -> Entry:
    facts = [f"{name} fact {i}: " + "likes hiking, jazz and long walks by the river; " * 4 for i in range(observations)]
    return Entry(entity=GraphEntity(name=name, entityType="person", observations=facts),
                 relations=[(next(RELATION_IDS), GraphRelation(from_=name, to=f"Friend {i}", relationType="knows"))
                            for i in range(relations)], more_relations=more)


def text_of(page) -> str:
    return json.dumps(page.graph().model_dump(mode="json", by_alias=True, exclude_none=True), indent=2,
                      ensure_ascii=False)


def test_a_page_takes_whole_entities_with_their_relations_until_one_does_not_fit():
    entries = [entry(f"Person {i}", relations=3) for i in range(1_000)]
    page = fill(entries)
    assert 10 < page.taken < 1_000 and page.bounded and page.cut is None
    graph = page.graph()
    assert [e.name for e in graph.entities] == [f"Person {i}" for i in range(page.taken)]
    assert all(e.observations == entries[i].entity.observations for i, e in enumerate(graph.entities))
    assert len(graph.relations) == 3 * page.taken
    assert graph.relations_truncated is None and graph.observations_truncated is None
    said = note(page, first=0, found=1_000, next_offset=page.taken, again="call open_nodes with offset={next}")
    assert estimate_tokens(text_of(page)) + estimate_tokens(said) <= TEXT_TOKENS
    # One more entity would not have fitted: the bound is used, not merely kept.
    bigger = fill(entries[:page.taken + 1], room=10**9)
    assert estimate_tokens(text_of(bigger)) > TEXT_TOKENS - 400
    assert said == (f"This answer holds entities 1 to {page.taken} of the 1,000 found, with their relations: an "
                    f"answer takes at most 20,000 tokens. To read on, call open_nodes with offset={page.taken}.")


def test_what_fits_is_whole_and_says_nothing():
    page = fill([entry("Ann"), entry("Ben")])
    assert page.taken == 2 and not page.bounded
    assert note(page, first=0, found=2, next_offset=None, again="") is None


def test_an_entity_that_alone_does_not_fit_comes_cut_and_the_note_says_what_is_left():
    hub = entry("Hub", observations=3, relations=5_000)
    page = fill([hub, entry("Next")])
    assert page.taken == 1 and page.cut is not None
    graph = page.graph()
    assert graph.entities[0].observations == hub.entity.observations  # observations first, then relations
    shown = len(graph.relations)
    assert 100 < shown < 5_000 and [r for _, r in hub.relations[:shown]] == graph.relations
    assert graph.relations_truncated is True and graph.observations_truncated is None
    said = note(page, first=0, found=2, next_offset=1, again="call open_nodes with the same names and offset={next}")
    assert estimate_tokens(text_of(page)) + estimate_tokens(said) <= TEXT_TOKENS
    assert f"'Hub' takes more than an answer holds (20,000 tokens), so it is shown with all its observations and " \
           f"{shown:,} of its 5,000 relations (the first created)" in said
    assert said.endswith("To read on, call open_nodes with the same names and offset=1.")

    long_lived = entry("default_user", observations=1_000, relations=4)
    page = fill([long_lived])
    graph = page.graph()
    kept = graph.entities[0].observations
    assert 0 < len(kept) < 1_000 and kept == long_lived.entity.observations[:len(kept)]
    assert graph.relations == [] and graph.observations_truncated is True and graph.relations_truncated is True
    assert f"{len(kept):,} of its 1,000 observations (the first) and 0 of its 4 relations" in note(
        page, first=0, found=1, next_offset=None, again="")


def test_an_entity_whose_relations_were_not_all_read_starts_a_page_of_its_own():
    page = fill([entry("Ann"), entry("Hub", relations=3, more=True)])
    assert page.taken == 1 and not page.bounded  # read_graph: not the bound, no note of it
    assert note(page, first=0, found=None, next_offset=1, again="call read_graph with offset={next}") is None
    alone = fill([entry("Hub", relations=3, more=True), entry("Ann")])
    assert alone.taken == 1 and alone.graph().relations_truncated is True
    assert "3 of its more than 3 relations; the rest of it is on no page" in note(alone, first=0, found=None, next_offset=1, again="x {next}")


def test_the_bound_holds_for_scripts_that_cost_more_a_character():
    name = "한국어이름" * 60  # 300 characters, the longest name, of a script estimated at 1.5 tokens a character
    big = Entry(entity=GraphEntity(name=name, entityType="사람", observations=["관찰 기록입니다 " * 250] * 40),
                relations=[(i, GraphRelation(from_=name, to=f"친구 {i}", relationType="안다")) for i in range(50)])
    page = fill([big])
    said = note(page, first=0, found=3, next_offset=1, again="call open_nodes with the same names and offset={next}")
    assert page.graph().observations_truncated is True
    assert estimate_tokens(text_of(page)) + estimate_tokens(said) <= TEXT_TOKENS
