"""Step 4 of a search, the passages: a short random walk with restart (personalized PageRank) over the graph of
entities and the passages that mention them.

The walk restarts at the query's seeds: the entities the query names as proper names (weighted down the more
passages mention them) and the far ends of each one's facts nearest the query (when it names none: the two ends of
the facts most similar to the query among the facts of the entities nearest it), and, lightly, the passages most
similar to the query (fused with the keyword channel's, with pseudo-relevance feedback for those that mention no
entity); a seed whose name holds other names ("Fredericton, New Brunswick", "Maharashtra state") brings in the
entities they name ("Fredericton", "New Brunswick", "Maharashtra") as well. A passage scores by the share of the
walk that reaches it, so a passage about the bridge entity of a multi-hop question ("the performer of Hello Love"
-> Hank Snow -> where he died) ranks high although its text shares little with the question, and entities every
passage mentions ("United States") spread their weight thin. The entities the walk reached most beyond its seeds
(the likely bridges) then seed a shorter walk, which ranks the passages about them, and so on while the walk has
steps left. The passage that follows each of the best in reading order (a conversation's reply) is lifted; the
chunks just before and after each of the best in reading order join the passages ranked next: a passage cut from a
longer text goes on there. Of the best, those that hold an id the query names (an error code, an option) come first.
A passage whose sentences a better-ranked one holds (a copy of a file stored under another id, an email's quote of
an earlier one) is then not shown again (`without_repeats`): the next one takes its place.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from duckgraph.core.domain.chunking import SENTENCE_BREAK, is_signature, unquoted
from duckgraph.core.domain.search_options import SearchOptions, edge_filter, in_window, timed
from duckgraph.core.domain.texts import passage_text
from duckgraph.ports import ChunkRecord, GraphStore, NodeRecord, entity_key, isin_ids, loose_key, name_candidates
from duckgraph.ports.text import one_line

if TYPE_CHECKING:
    import numpy as np


#: Where a name's parts meet ("Fredericton, New Brunswick"; not "2,913,123"): see `_with_name_parts`.
_PARTS = re.compile(r"\s*,\s+")


def rank_passages(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, named: list[NodeRecord],
    nearest: list[tuple[int, float]], nearest_chunks: list[tuple[int, float]], keyword_chunks: list[tuple[int, float]],
    options: SearchOptions, held: Collection[int] = (),
) -> list[tuple[ChunkRecord, float]]:
    """The best `max_passages` passages, then the `more_passages` ranked next, each part best first; `held`: the
    passages that hold an id the query names whole, first (`_led_by_ids`). `nearest_chunks` and `keyword_chunks`
    are among the passages the time window may show already (`nearest_passages`, `keyword_passages`)."""
    import numpy as np  # see _walk

    direct = dict(nearest_chunks)
    if options.max_passages <= 0 or not direct:
        return []
    proper = _proper_names(query_text, named, query, store)
    if proper:
        degree = Counter(node_id for _, node_id in store.chunks_mentioning(proper, limit=2**62))
        rarity = {node_id: _rarity(degree.get(node_id, 0)) for node_id in proper}
        node_seeds, best_fact = _named_fact_seeds(store, query, namespace, rarity, options)
        best_fact = best_fact or max(direct.values())
        for node_id in proper:
            weight = options.name_seed_weight * best_fact * rarity[node_id]
            node_seeds[node_id] = max(node_seeds.get(node_id, 0.0), weight)
    else:
        node_seeds = _fact_seeds(store, query, namespace, [node_id for node_id, _ in nearest], options)
        best_fact = max(node_seeds.values(), default=max(direct.values()))
    top_similarity = max(direct.values())
    direct = _with_keywords(store, query_text, query, direct, keyword_chunks, namespace, options)
    # Seeds are shares of the best passage's score; with none above 0 (an embedder whose vectors are orthogonal
    # to the query's, a hashing one) every seed is 0 whatever it is divided by.
    top_direct = max(direct.values()) if max(direct.values()) > 0 else 1.0
    chunk_seeds = {c: options.passage_seed_weight * max(s, 0.0) / top_direct for c, s in direct.items()}
    node_seeds = _with_name_parts(store, node_seeds, namespace)
    chunk_ids, scores = _walk_with_bridges(store, node_seeds, chunk_seeds, {n.id for n in named}, best_fact,
                                           namespace, options)
    # Passages the walk reached beyond the nearest ones also keep their own (restart) share of similarity.
    others = ~isin_ids(chunk_ids, np.fromiter(direct, np.int64, len(direct)))
    similarity = np.nan_to_num(store.similarity_array("chunk", chunk_ids[others], query), nan=0.0)
    restart = (1 - options.walk_damping) * options.passage_seed_weight / top_direct
    scores[others] += restart * np.maximum(similarity, 0.0)
    shown = in_window(store, chunk_ids, namespace, options)
    chunk_ids, (scores, lead) = chunk_ids[shown], _led_by_best_match(chunk_ids[shown], scores[shown], direct)
    chunk_ids, scores = _with_replies(store, chunk_ids, scores, namespace, options)
    # 4 candidates per passage wanted leave room for passages of the same document; ties: lower ids first.
    best = np.argsort(-scores, kind="stable")[: 4 * (options.max_passages + options.more_passages_wanted)]
    ranked = _one_per_document(store, list(zip(chunk_ids[best].tolist(), scores[best].tolist())), namespace, options)
    ranked = _led_by_ids(ranked[: options.max_passages], held) + ranked[options.max_passages:]
    shown = ranked[: options.max_passages] + [
        (chunk, score) for chunk, score in ranked[options.max_passages:]
        if score >= options.more_passages_share * ranked[0][1]]
    lifted = bool(shown) and shown[0][0].id == lead
    return list(zip([chunk for chunk, _ in shown], _absolute_scores(store, shown, top_similarity, lifted, query)))


def without_repeats(
    ranked: list[tuple[ChunkRecord, float]]
) -> list[tuple[ChunkRecord, float, list[ChunkRecord]]]:
    """The passages a search shows (`rank_passages`'s, best first) less each all of whose sentences another one
    holds, read without quote markers and whitespace collapsed (`chunking.unquoted`), each with those folded into it
    (`Passage.also_in`): a file stored twice (a copy, a backup folder ingested too) had its passages shown in turn
    from both, and an email thread stored a message per document the quotes of its first message in each reply, the
    same text read several times in the room of another. A passage is folded into the first better-ranked one that
    holds it; one that holds better-ranked ones (the message that a reply's quote, ranked above it, quotes) takes
    the first one's place and score: the text is shown once, in full. So does a message ranked below a quote of
    it word for word (a thread's first message, ranked below the reply that quotes it): the original is shown
    where the quote was, not the reverse. Headings, titles and dates may differ; the documents stay stored apart,
    whole."""
    kept: list[tuple[ChunkRecord, float, list[ChunkRecord]]] = []
    texts: list[tuple[str, list[str], bool]] = []  # each kept passage's words between spaces, sentences, if quoted
    for chunk, score in ranked:
        words = unquoted(chunk.text) or one_line(chunk.text)  # a passage that only introduces a quote: its own words
        spaced, sentences, quoted = f" {words} ", SENTENCE_BREAK.split(words), words != one_line(chunk.text)
        holder = next((i for i, (text, _, quotes) in enumerate(texts)
                       if _holds(text, sentences) and not (quotes and not quoted and text == spaced)), None)
        if holder is not None:
            kept[holder][2].append(chunk)
            continue
        inner = [i for i, (_, held, _) in enumerate(texts) if _holds(spaced, held)]
        if not inner:
            kept.append((chunk, score, []))
            texts.append((spaced, sentences, quoted))
            continue
        folded = [other for i in inner for other in (kept[i][0], *kept[i][2])]
        kept[inner[0]], texts[inner[0]] = (chunk, kept[inner[0]][1], folded), (spaced, sentences, quoted)
        for i in reversed(inner[1:]):
            del kept[i], texts[i]
    return kept


def _holds(text: str, sentences: list[str]) -> bool:
    """Whether `text` (words between spaces) holds each of `sentences` whole, not as the end of a longer word."""
    return all(f" {sentence} " in text for sentence in sentences)


def _led_by_best_match(
    chunk_ids: np.ndarray, scores: np.ndarray, direct: dict[int, float]
) -> tuple[np.ndarray, int | None]:
    """The walk's scores with the passage that matches the query best by itself (`direct`: its similarity, and
    its words where it mentions no entity) scored just above the walk's best, so it is shown, first. The walk
    ranks passages by how much of it reaches them, which favours those about many of the query's entities and
    their neighbours; the passage that states the asked detail in the query's own words ("max_client_conn" of
    pgbouncer) may mention the named entity only, or none, and would come after all of them. Also returns the
    lifted passage's id (None when the walk ranked it first already)."""
    import numpy as np  # see _walk

    if not len(chunk_ids) or not direct:
        return scores, None
    # The direct candidates (a few dozen) looked up among the walk's passages (sorted ids, often thousands).
    ids = np.fromiter(direct, np.int64, len(direct))
    at = np.minimum(np.searchsorted(chunk_ids, ids), len(chunk_ids) - 1)
    hit = chunk_ids[at] == ids
    found = [(direct[i], -i, p) for i, p in zip(ids[hit].tolist(), at[hit].tolist())]
    if not found:
        return scores, None
    _, negated_id, lead = max(found)  # ties: the lower id
    lead_id, top = -negated_id, float(scores.max())
    if scores[lead] >= top:
        return scores, None
    scores = scores.copy()  # the caller's stay as they were
    scores[lead] = np.nextafter(top, np.inf)
    return scores, lead_id


def _led_by_ids(
    passages: list[tuple[ChunkRecord, float]], held: Collection[int]
) -> list[tuple[ChunkRecord, float]]:
    """The best passages (`passages`, best first) with those that hold an id the query names whole (`held`:
    "ECONNREFUSED", "-Xmx4g", "ORA-00942") scored just above the others, in their own order. A memory holds an id
    verbatim or not at all and the vectors barely see it: the passage that holds it may tell of it in other words
    than the question's ("how do I fix connection refused on the api-gateway (ECONNREFUSED)?" and a log line) and
    rank below passages about the question's other words, while a passage that mentions entities gets no lift from
    its words (`_with_keywords`). Only among the best: a name in capitals that an encyclopedia holds in many
    passages ("UK", "NATO") would otherwise push out those that answer a multi-hop question."""
    holding = [(chunk, score) for chunk, score in passages if chunk.id in held]
    others = [(chunk, score) for chunk, score in passages if chunk.id not in held]
    if not holding or not others:
        return passages
    top = others[0][1]
    # At least the others' best, then apart by a share too small to change the scores shown (`_absolute_scores`).
    step = max(top, holding[0][1], 1e-12) * 1e-9
    return [(chunk, max(score, top) + step * (len(holding) - rank))
            for rank, (chunk, score) in enumerate(holding)] + others


def _with_replies(
    store: GraphStore, chunk_ids: np.ndarray, scores: np.ndarray, namespace: str, options: SearchOptions
) -> tuple[np.ndarray, np.ndarray]:
    """The walk's passages with the one that follows each of the best `max_passages` in reading order (the next
    turn of a conversation kept one turn per document, the next chunk of a text: `_neighbours`)
    scored at least `reply_share` of it. A question's words match the turn that asks or tells of a thing; what
    was said of it is often in the reply, whose own words share little with the question."""
    import numpy as np  # see _walk

    if options.reply_share <= 0 or not len(chunk_ids):
        return chunk_ids, scores
    best = np.argsort(-scores, kind="stable")[: options.max_passages]
    lead = dict(zip(chunk_ids[best].tolist(), scores[best].tolist()))
    lifted: dict[int, float] = {}
    for chunk_id, (_, after) in _neighbours(store, list(lead), namespace, options).items():
        if after is not None:
            lifted[after] = max(lifted.get(after, 0.0), options.reply_share * lead[chunk_id])
    replies = np.fromiter(lifted, np.int64, len(lifted))
    if not len(replies):
        return chunk_ids, scores
    present = np.flatnonzero(isin_ids(chunk_ids, replies))
    scores = scores.copy()  # the caller's stay as they were
    scores[present] = np.maximum(scores[present], [lifted[i] for i in chunk_ids[present].tolist()])
    new = replies[~isin_ids(replies, chunk_ids[present])]
    return np.concatenate([chunk_ids, new]), np.concatenate([scores, [lifted[i] for i in new.tolist()]])


def _with_keywords(
    store: GraphStore, query_text: str, query: np.ndarray, nearest: dict[int, float],
    keyword_chunks: list[tuple[int, float]], namespace: str, options: SearchOptions,
) -> dict[int, float]:
    """The passages nearest the query, fused with those the keyword (BM25) channel finds, as the walk's passage
    seeds. A passage that mentions no entity, which the walk cannot reach through the graph, scores its cosine
    similarity plus `keyword_weight` x the best cosine x its BM25 score over the best one's, so an exact id,
    number or rare word the vectors miss ("INC-142") lifts it. A passage that mentions entities keeps its
    cosine: the graph already carries the words that matter there (the entities the query names seed the walk),
    and lifting such passages by their words as well pulled multi-hop answers' bridge passages down."""
    import numpy as np  # see _walk

    found = dict(keyword_chunks)
    if not found or options.keyword_weight <= 0:
        return nearest
    candidates = np.fromiter({*nearest, *found}, np.int64)
    linked = set(store.links((), candidates, namespace, as_of=edge_filter(options)).chunk_nodes[0].tolist())
    missing = np.fromiter((i for i in found if i not in nearest and i not in linked), np.int64)
    similarity = np.nan_to_num(store.similarity_array("chunk", missing, query), nan=0.0)
    fused = {**nearest, **dict(zip(missing.tolist(), similarity.tolist()))}
    # Every candidate is scored on both channels: one the vectors found also gets its words' score, even where it
    # is not among the keyword channel's best.
    unscored = [i for i in fused if i not in found and i not in linked]
    found.update(store.keyword_scores("chunk", query_text, unscored, namespace) if unscored else {})
    lift = options.keyword_weight * max(max(nearest.values(), default=0.0), 0.0) / max(found.values())
    fused = {i: s + (0.0 if i in linked else lift * found.get(i, 0.0)) for i, s in fused.items()}
    return _with_feedback(store, query, fused, found, linked, namespace, options)


def _with_feedback(
    store: GraphStore, query: np.ndarray, fused: dict[int, float], found: dict[int, float], linked: set[int],
    namespace: str, options: SearchOptions,
) -> dict[int, float]:
    """Pseudo-relevance feedback for the candidate passages that mention no entity: the best `feedback_passages`
    of them are taken as relevant, and each such candidate is scored again as `_with_keywords` scores it, its
    cosine taken to the query vector moved towards their mean vector (Rocchio, `feedback_weight`) and its BM25
    score joined by `feedback_keyword_weight` x its score for their words (each over its best). A conversation
    says one thing over several turns in other words than the question's; the turns that match best bring in
    their words and their meaning. Passages that mention entities have the graph for that.

    Feedback orders these candidates among themselves, within the range they scored before it: the best of them
    keeps its score and the others follow in proportion. The moved query is nearer the feedback passages by
    construction and their words echo their own, so their new scores are no evidence against the passages that
    mention entities, which keep their cosine: unscaled, a one-line "Rejected." of another decision led "why was
    Keycloak rejected?" over the passage that names Keycloak."""
    import numpy as np  # see _walk

    unlinked = [i for i in fused if i not in linked]
    if options.feedback_passages <= 0 or len(unlinked) <= options.feedback_passages:
        return fused
    best = sorted(unlinked, key=lambda i: (-fused[i], i))[: options.feedback_passages]
    vectors = store.get_vectors("chunk", best)
    if not vectors:
        return fused
    moved = query + options.feedback_weight * np.mean(list(vectors.values()), axis=0)
    moved = moved / max(float(np.linalg.norm(moved)), 1e-12)
    ids = np.fromiter(unlinked, np.int64, len(unlinked))
    cosine = np.nan_to_num(store.similarity_array("chunk", ids, moved), nan=0.0)
    chunks = store.get_chunks(best)
    titles = store.document_titles({c.document_id for c in chunks}, namespace)
    echoed = store.keyword_scores(
        "chunk", " ".join(passage_text(titles.get(c.document_id, ""), c.text, c.section) for c in chunks), unlinked,
        namespace)
    top_found, top_echoed = max(found.values(), default=0.0) or 1.0, max(echoed.values(), default=0.0) or 1.0
    words = {i: found.get(i, 0.0) / top_found + options.feedback_keyword_weight * echoed.get(i, 0.0) / top_echoed
             for i in unlinked}
    lift = options.keyword_weight * max(float(cosine.max()), 0.0) / (max(words.values()) or 1.0)
    again = {i: c + lift * words[i] for i, c in zip(ids.tolist(), cosine.tolist())}
    top_before, top_again = max(fused[i] for i in unlinked), max(again.values())
    scale = top_before / top_again if top_before > 0 and top_again > 0 else 1.0
    return {**fused, **{i: score * scale for i, score in again.items()}}


def _absolute_scores(
    store: GraphStore, ranked: list[tuple[ChunkRecord, float]], top_similarity: float, lifted: bool,
    query: np.ndarray,
) -> list[float]:
    """Walk scores made comparable across queries: the best passage scores the best similarity of any passage to
    the query (a cosine), the others in proportion, so the ranking stays the walk's while an off-topic query, whose
    nearest passage is far, gets low scores. When the first passage is there only as the best match
    (`_led_by_best_match`, `lifted`), it scores its own similarity, and the walk's own best comes next scoring its
    own similarity, the rest in proportion: neither shows another passage's score (a passage lifted by its words
    may then score below the one after it)."""
    if not ranked:
        return []
    scores = [score for _, score in ranked]
    if lifted:
        ids = [chunk.id for chunk, _ in ranked[:2]]
        own = [max(min(0.0 if math.isnan(s) else s, top_similarity), 0.0)
               for s in store.similarity_array("chunk", ids, query).tolist()]
        follow = own[1] / scores[1] if len(ranked) > 1 and scores[1] > 0 else 0.0
        return [own[0]] + [score * follow for score in scores[1:]]
    scale = max(top_similarity, 0.0) / scores[0] if scores[0] > 0 else 0.0
    return [score * scale for score in scores]


def _one_per_document(
    store: GraphStore, candidates: list[tuple[int, float]], namespace: str, options: SearchOptions
) -> list[tuple[ChunkRecord, float]]:
    """The best `max_passages` of the ranked `candidates`, at most one per document while other documents have
    some, then the `more_passages` ranked next by the same rule with the chunks next to the best in reading order
    (`_with_adjacent`), each part best first.

    A passage that one picked before it holds (`without_repeats`: a copy, an email's quote of an earlier message)
    takes neither a place nor its document's turn: the passages are picked again without it, and it comes last, to
    be folded into that one. The reply that quotes the first message of a thread is shown by its own words.

    An email's signature (`chunking.is_signature`) is about its sender, not what the message says: while another
    passage of its document is a candidate, it takes not its document's turn but comes after the first passage of
    each document, as a document's second passage does. The message's own words stand for it; a name, a phone
    number or a disclaimer that matched the query's names is shown after them where there is room."""
    scores = dict(candidates)
    document_of = store.chunk_documents(list(scores))
    chunks = {chunk.id: chunk for chunk in store.get_chunks(list(scores))}
    worded = {document_of.get(i) for i, chunk in chunks.items() if not is_signature(chunk.text)}
    signatures = {i for i, chunk in chunks.items() if is_signature(chunk.text) and document_of.get(i) in worded}
    folded: list[tuple[ChunkRecord, float]] = []
    left_out: set[int] = set()
    while True:
        order = sorted(((i, score) for i, score in scores.items() if i not in left_out), key=lambda item: -item[1])
        picked = _picked(store, order, document_of, signatures, left_out, namespace, options)
        chunks.update((c.id, c) for c in store.get_chunks([i for i, _ in picked if i not in chunks]))
        shown = [(chunks[chunk_id], score) for chunk_id, score in picked if chunk_id in chunks]
        kept = without_repeats(shown)
        repeats = {repeat.id for _, _, held in kept for repeat in held}
        if not repeats:
            return shown + folded
        folded += [(chunk, score) for chunk, score in shown if chunk.id in repeats]
        left_out |= repeats
        # A passage that holds a better-ranked one takes its rank, not the score of a chunk next to the best.
        for chunk, _, held in kept:
            ranks = [scores[i] for i in (chunk.id, *(other.id for other in held)) if i in scores]
            if ranks:
                scores[chunk.id] = max(ranks)


def _picked(
    store: GraphStore, candidates: list[tuple[int, float]], document_of: dict[int, str], signatures: set[int],
    left_out: set[int], namespace: str, options: SearchOptions,
) -> list[tuple[int, float]]:
    """`_one_per_document`'s choice among `candidates`, `signatures` among each document's later passages, none of
    `left_out` among the chunks next to the best."""
    seen: set[str] = set()
    first, repeats = [], []
    for chunk_id, score in candidates:
        if (document_id := document_of.get(chunk_id)) is None:
            continue
        if document_id in seen or chunk_id in signatures:
            repeats.append((chunk_id, score))
        else:
            first.append((chunk_id, score))
            seen.add(document_id)
    order = first + repeats
    limit = options.max_passages
    best = sorted(order[:limit], key=lambda item: -item[1])
    next_ones = order[limit : limit + options.more_passages_wanted]
    return [*best, *_with_adjacent(store, best, next_ones, left_out, namespace, options)]


def _with_adjacent(
    store: GraphStore, best: list[tuple[int, float]], next_ones: list[tuple[int, float]], left_out: set[int],
    namespace: str, options: SearchOptions,
) -> list[tuple[int, float]]:
    """The passages ranked next (`next_ones`) and the chunks just before and after each of the `best` in reading
    order (`_neighbours`), each such chunk scored as the best passage beside it: at most `more_passages`, best
    first.

    A passage is a piece of a longer text cut to the chunk size, and what it leaves out goes on in the next or the
    previous piece: the paragraph on a city's snowfall whose figures fell into the chunk before, which mentions
    other entities and so gets little of the walk (the parent document / sentence window of retrieval)."""
    if options.more_passages_wanted <= 0:
        return []
    scores, shown = dict(next_ones), dict(best)
    for chunk_id, adjacent in _neighbours(store, list(shown), namespace, options).items():
        for other in adjacent:
            if other is not None and other not in shown and other not in left_out:
                scores[other] = max(scores.get(other, 0.0), shown[chunk_id])
    return sorted(scores.items(), key=lambda item: -item[1])[: options.more_passages_wanted]


def _neighbours(
    store: GraphStore, ids: list[int], namespace: str, options: SearchOptions
) -> dict[int, tuple[int | None, int | None]]:
    """The chunks before and after each of `ids` in reading order (`GraphStore.adjacent_chunks`), less those the
    search's time window leaves out (a conversation's next turn may be timed after `as_of`) and an email's
    signatures (`chunking.is_signature`): a name and a legal disclaimer are no reply, nor what a passage goes on
    with."""
    adjacent = store.adjacent_chunks(ids, namespace)
    others = [other for pair in adjacent.values() for other in pair if other is not None]
    kept = {chunk.id for chunk in store.get_chunks(others) if not is_signature(chunk.text)}
    if timed(options):
        kept &= {other for other, keep in zip(others, in_window(store, others, namespace, options).tolist()) if keep}
    return {i: (before if before in kept else None, after if after in kept else None)
            for i, (before, after) in adjacent.items()}


def _fact_seeds(
    store: GraphStore, query: np.ndarray, namespace: str, nearest: list[int], options: SearchOptions
) -> dict[int, float]:
    """The ends of the facts nearest the query, each weighted by its best fact's similarity.

    The facts are those of the nodes nearest the query, not all of them: a fact close to a question is nearly
    always about an entity close to it too (on the MuSiQue set, 96.5% of the 4 best facts are the same), and
    scoring the edges of 100 nodes costs a fraction of a millisecond where searching millions of edge vectors
    costs tens (and an index over them).
    """
    if options.fact_seeds <= 0 or not nearest:
        return {}
    seeds: dict[int, float] = {}
    for source, target, weight in _nearest_facts(store, query, namespace, nearest, options.fact_seeds,
                                                 20 * len(nearest), options):
        for node_id in (source, target):
            seeds[node_id] = max(seeds.get(node_id, 0.0), max(weight, 0.0))
    return seeds


def _nearest_facts(
    store: GraphStore, query: np.ndarray, namespace: str, node_ids: list[int], k: int, limit: int,
    options: SearchOptions,
) -> list[tuple[int, int, float]]:
    """The `k` facts most similar to the query among those of `node_ids` (at most `limit` of them, the strongest
    first), as (source, target, similarity), most similar first."""
    import numpy as np  # see _walk

    edge_ids, sources, targets, _ = store.neighbor_ends(node_ids, namespace, as_of=edge_filter(options), limit=limit)
    similarity = store.similarity_array("edge", edge_ids, query)
    scored = np.flatnonzero(~np.isnan(similarity))  # edges stored without a vector are no facts to match
    best = scored[np.argsort(-similarity[scored], kind="stable")[:k]]
    return list(zip(sources[best].tolist(), targets[best].tolist(), similarity[best].tolist()))


def _rarity(passages: int) -> float:
    """How much an entity mentioned by `passages` passages weighs as a seed: log(2)/log(1 + n), 1 for a name one
    passage mentions, a third for one that seven passages mention (a hub spreads the walk over passages that are
    not about the query)."""
    return math.log(2) / math.log(1 + max(passages, 1))


def _named_fact_seeds(
    store: GraphStore, query: np.ndarray, namespace: str, rarity: dict[int, float], options: SearchOptions
) -> tuple[dict[int, float], float]:
    """The far ends of the `facts_per_name` facts nearest the query of each entity the query names, each weighted
    by its fact's similarity and its named entity's rarity; and the best of those facts' similarities.

    A multi-hop question starts from what it names ("the performer of Hello Love"), and the fact that leads on
    from there (Hello Love -PERFORMED_BY-> Hank Snow) is among the named entity's facts nearest the question. The
    facts nearest the question anywhere are taken over by its last hop's words ("how many stores"): those of
    similar entities it does not name ("41st Chess Olympiad" for one about the 26th), which lead the walk away.
    Each name gets its own facts, so a question naming two chains follows both.
    """
    seeds: dict[int, float] = {}
    best_fact = 0.0
    if options.fact_seeds <= 0:  # no fact seeds at all
        return seeds, best_fact
    for named_id, share in rarity.items():
        for source, target, weight in _nearest_facts(store, query, namespace, [named_id], options.facts_per_name,
                                                     options.frontier * 20, options):
            far = target if source == named_id else source
            seeds[far] = max(seeds.get(far, 0.0), max(weight, 0.0) * share)
            best_fact = max(best_fact, weight)
    return seeds, best_fact


def _walk_with_bridges(
    store: GraphStore, node_seeds: dict[int, float], chunk_seeds: dict[int, float], named: set[int],
    best_fact: float, namespace: str, options: SearchOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """The walk from the seeds, then from the bridges it leads to: the passages reached and their scores.

    The `bridge_seeds` entities a walk reached with most weight, other than the seeds so far and the entities the
    query names, are what the seeds' facts and passages lead to: the bridge of a multi-hop question (Hank Snow,
    reached from Hello Love), whose own passages (where he died) the walk reached only thinly, its weight spread
    over all of them. Each round walks on from the last round's bridges, one step beyond the seeds before it: one
    step shorter (while a step is left), each bridge weighted the walk's damping times the round before's weight
    (the best fact's similarity first), scaled by its weight over the most reached bridge's. The walk is linear in
    its seeds, so each round's scores add to the first's.
    """
    import numpy as np  # see _walk

    chunk_ids, scores, reached = _walk(store, node_seeds, chunk_seeds, namespace, options)
    seen = dict(node_seeds)
    total = sum(node_seeds.values()) + sum(chunk_seeds.values())
    weight = best_fact
    for steps in range(options.walk_steps - 1, 0, -1):
        node_ids, weights = reached
        weight *= options.walk_damping
        chosen = [i for i in np.argsort(-weights, kind="stable").tolist()
                  if (node_id := int(node_ids[i])) not in seen and node_id not in named][: options.bridge_seeds]
        if not chosen or weight <= 0 or weights[chosen[0]] <= 0:
            break
        bridges = {int(node_ids[i]): weight * float(weights[i] / weights[chosen[0]]) for i in chosen}
        seen.update(bridges)
        total += sum(bridges.values())
        more_ids, more_scores, reached = _walk(store, bridges, {}, namespace, replace(options, walk_steps=steps),
                                               weight_of_seeds=total)
        chunk_ids, scores = _summed([(chunk_ids, scores), (more_ids, more_scores)])
    return chunk_ids, scores


def _with_name_parts(store: GraphStore, node_seeds: dict[int, float], namespace: str) -> dict[int, float]:
    """The seeds and the entities named by the parts of their names (`_name_parts`: "Fredericton" and "New
    Brunswick" in "Fredericton, New Brunswick", "Maharashtra" in "Maharashtra state"), each as heavy as the heaviest
    seed whose name holds it.

    Extractors write one place several ways, as different entities: the passage that says where Meehan Bonnar was
    born names "Fredericton, New Brunswick", the one about the Diocese of Fredericton names "Fredericton", and the
    walk has no link between them; the passage about Shringarpur names "Maharashtra state", the one about the state
    "Maharashtra". The parts after the first name what holds it ("Pocahontas Mounds is in Hinds County,
    Mississippi"): what a question often asks for next ("when did the state where Pocahontas Mounds is become part
    of the United States?"). A part that names no stored entity brings nothing.
    """
    weight_of: dict[str, float] = {}  # a part's loose key -> the heaviest seed whose name holds it
    keys: set[str] = set()
    for node in store.get_nodes([node_id for node_id, weight in node_seeds.items() if weight > 0]):
        for part in _name_parts(node.name):
            if loose := loose_key(part):
                weight_of[loose] = max(weight_of.get(loose, 0.0), node_seeds[node.id])
                keys.update((loose, entity_key(part)))
    parts: dict[int, float] = {}
    loose_keys = set(weight_of)
    for other in store.find_nodes(namespace, keys) if keys else []:
        if other.id not in node_seeds and (key := _matched_key(other, loose_keys)):
            parts[other.id] = max(parts.get(other.id, 0.0), weight_of[key])
    return {**node_seeds, **parts} if parts else node_seeds


def _name_parts(name: str) -> list[str]:
    """The names inside an entity's name: its parts between commas, and each longest run of capitalised words that
    is not the whole name, when a lower-case word longer than three letters tells that the name is a proper name
    with common nouns around it ("2000 Hong Kong action film", "Roman invasion of Britain"). A name written in title
    case, where only articles, conjunctions and short prepositions stay lower case ("The Jewel of the Nile", "Jump
    for Glory"), or a date ("7 December 1988"), is one name: "Nile" there is no seed for a question about the
    film."""
    name = name.strip()
    parts = _PARTS.split(name) if _PARTS.search(name) else []
    if not any(word.isalpha() and word.islower() and len(word) > 3 for word in name.split()):
        return parts
    runs: list[list[str]] = [[]]
    for word in name.split():
        if word[0].isupper():
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    capitalised = (" ".join(words) for words in runs if words)
    return [*parts, *(run for run in capitalised if run != name and run not in parts)]


def _proper_names(query_text: str, named: list[NodeRecord], query: np.ndarray, store: GraphStore) -> list[int]:
    """Nodes the query names as proper names, leaving out those inside a longer name it also names.

    A name several nodes share ("Apple": the company's alias, the fruit) stands for the one nearest the query.
    """
    proper_keys = {loose_key(key) for key in name_candidates(query_text, proper_only=True)}
    keys = {n.id: k for n in named if (k := _matched_key(n, proper_keys))}
    similarity = store.similarities("node", list(keys), query)
    sense: dict[str, int] = {}
    for node_id, key in keys.items():
        if key not in sense or similarity.get(node_id, -1.0) > similarity.get(sense[key], -1.0):
            sense[key] = node_id
    return [node_id for key, node_id in sense.items()
            if not any(other != key and f" {key} " in f" {other} " for other in sense)]


def _matched_key(node: NodeRecord, loose_keys: set[str]) -> str | None:
    """The loose form of the node's name or alias that the query names, if any."""
    for name in (node.name, *node.aliases):
        if (key := loose_key(name)) in loose_keys:
            return key
    return None


def _walk(
    store: GraphStore, node_seeds: dict[int, float], chunk_seeds: dict[int, float], namespace: str,
    options: SearchOptions, weight_of_seeds: float | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Personalized PageRank over entities and passages by power iteration from the seeds, `walk_steps` long.

    Only what the walk reaches is fetched (links of the nodes and chunks holding weight), so the cost follows
    the seeds' neighbourhood, not the size of the graph; each step moves weight over all its links at once.
    Returns the passages reached (sorted ids) and their scores, and the entities that held weight before the
    last step (ids, weights). `weight_of_seeds` is what the negligible share (`walk_min_share`) is taken of, when
    this walk adds to another (default: these seeds' own weight).
    """
    import numpy as np  # loaded by then (the query vector is an array); not at import, to keep start-up light

    damping = options.walk_damping
    # An entity or passage holding less than this share of the seeds' weight moves too little to change the
    # ranking: dropping it spares fetching the links of most of the neighbourhood (each of a hub's thousands of
    # neighbours and passages holds a thousandth of its share).
    if weight_of_seeds is None:
        weight_of_seeds = sum(node_seeds.values()) + sum(chunk_seeds.values())
    negligible = options.walk_min_share * weight_of_seeds

    def arrays(seeds: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
        return _summed([(list(seeds), list(seeds.values()))])

    def spread(ids: np.ndarray, weight: np.ndarray, *owner_arrays: np.ndarray, degree: np.ndarray | None = None
               ) -> list[np.ndarray]:
        """Each id's damped weight, shared evenly over its links (`degree` of them, or those in the arrays): the
        share carried by each link of each array."""
        positions = [np.searchsorted(ids, np.asarray(owners, dtype=np.int64)) for owners in owner_arrays]
        if degree is None:
            degree = sum(np.bincount(p, minlength=len(ids)) for p in positions)
        share = np.divide(damping * weight, degree, out=np.zeros(len(ids)), where=degree > 0)
        return [share[p] for p in positions]

    (node_ids, node_weight), (chunk_ids, chunk_weight) = arrays(node_seeds), arrays(chunk_seeds)
    restart_nodes, restart_chunks = (node_ids, (1 - damping) * node_weight), (chunk_ids, (1 - damping) * chunk_weight)
    entities = (node_ids, node_weight)
    for step in range(options.walk_steps):
        held, held_chunks = node_weight >= negligible, chunk_weight >= negligible
        node_ids, node_weight, chunk_ids, chunk_weight = (
            node_ids[held], node_weight[held], chunk_ids[held_chunks], chunk_weight[held_chunks])
        entities = (node_ids, node_weight)
        if step == options.walk_steps - 1:  # only what flows into passages: each entity's degree, not its neighbours
            degree, (mentioned, mentioning) = store.passage_links(node_ids, namespace, as_of=edge_filter(options))
            chunk_ids, chunk_weight = _summed(
                [restart_chunks, (mentioning, *spread(node_ids, node_weight, mentioned, degree=degree))])
            break
        links = store.links(node_ids, chunk_ids, namespace, as_of=edge_filter(options))
        (neighbour_of, neighbours), (mentioned, mentioning) = links.node_neighbors, links.node_chunks
        to_neighbours, to_chunks = spread(node_ids, node_weight, neighbour_of, mentioned)
        chunk_of, in_chunk = links.chunk_nodes
        node_ids, node_weight = _summed(
            [restart_nodes, (neighbours, to_neighbours), (in_chunk, *spread(chunk_ids, chunk_weight, chunk_of))])
        chunk_ids, chunk_weight = _summed([restart_chunks, (mentioning, to_chunks)])
    return chunk_ids, chunk_weight, entities


def _summed(parts: list[tuple[Sequence[int], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) pairs merged: sorted distinct ids, each with the sum of its weights."""
    import numpy as np  # see _walk

    ids = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts])
    weights = np.concatenate([np.asarray(w, dtype=float) for _, w in parts])
    distinct, position = np.unique(ids, return_inverse=True)
    return distinct, np.bincount(position, weights=weights, minlength=len(distinct))
