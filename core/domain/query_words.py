"""What a query's words are: the words that say when, ask, list or name a type, the ids and names it writes, and
whether the memory holds them (keyword lookups of the store). Shared by the search (retrieval.py), its relevance
floor (relevance.py) and its notes on what it leaves out (left_out.py), and by global_search's `tells_time`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from duckgraph.core.domain.resolution import noun_form
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.ports import EdgeRecord, GraphStore, NodeRecord, loose_key, name_candidates, terms, tokens
from duckgraph.ports.text import WORD_RUN, stemmed

#: Words that ask for whatever a memory holds of a thing, not for one fact of it ("Tell me about Tomas", "What do
#: you know about Atlas?", "What happened on 11 October?"): they say nothing of whether the memory holds the answer.
_ASKING_WORDS = ("tell told know remember remind recall summarise summarize summary describe explain recap overview "
                 "details information anything everything something happened mention talk say said show give find")
#: Verbs that report what someone said or asked for ("What did Sarah ask me to do?", "What did José offer?", "What
#: did the vet recommend?"): what is asked is what was said ("Could you please update the deck..."), which a memory
#: seldom holds in the verb that reports it. They count as `_ASKING_WORDS` do, except in `asked_type`: there they
#: may name a type ("How many requests do we have?": Request, Offer, Proposal).
_SAYING_WORDS = "ask request want offer suggest propose recommend advise promise agree reply"
#: Words that ask what a change to a thing would bring about ("What would break if we drop Redis?", "What is the
#: impact of removing Redis?"): the conditionals, a closed class, and the few words that name an outcome. A list,
#: for the vectors do not tell such a question from one about a missing attribute: both are mostly the name
#: (`relevance._asks_for_relations`).
_CONSEQUENCE_WORDS = "if unless without impact effect affect consequence"
#: Words that ask for a list or a count of things ("How many incidents have we had?", "List all teams"): with
#: nothing but a stored entity type besides them (and `_ASKING_WORDS`), a query is about that type's entities.
_LISTING_WORDS = "list count many number total"
#: Month names (and the abbreviations that are no common word or first name).
MONTHS = frozenset("""january february march april may june july august september october november december
feb apr jun jul aug sep sept oct nov dec""".split())
#: Words that say when, not what: `MONTHS`, weekdays and the days next to today. The time window (as_of, after,
#: before) handles when; one of these that the memory does not hold says nothing of whether it holds the answer
#: ("on call for payments in March").
_WHEN_WORDS = MONTHS | frozenset("monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow "
                                 "tonight".split())
#: Words that name a span of time or place one relative to now ("that week", "last month", "the past few days").
#: Given a window (after, before), they speak of it (`_asks_for_window`); without one they may be what is asked
#: ("Which day is the deadline?", "How long is a sprint in weeks?"), so they are no `_WHEN_WORDS`.
_PERIOD_WORDS = "day week weekend fortnight month quarter year time period last past previous recent recently ago"
#: Words that ask what was done, not what about ("What did I work on that week?", "What kept me busy?"; "do", "up
#: to", "between" and "during" are no terms at all). Given a window, they ask for what it holds, as `_PERIOD_WORDS`
#: do; without one they may be what is asked ("Where does Priya work?"), so they are no `_ASKING_WORDS`.
_DOING_WORDS = "work busy spend spent keep kept get got done accomplish achieve"
#: A day of a month written with a number alone ("June 10", "10-16 June"): in a query that names a month, given a
#: window, it says when as `WHEN_DIGITS` do (without one, "2" of "the 2 June releases" may count things).
DAY = re.compile(r"\d{1,2}(?:-\d{1,2})?")
#: The same, written with digits (as `tokens` gives them): a year (1500-2099, or a decade: 1990s), a date
#: (2026-03-15, 2026-03, 15/03/2026), a time of day (10am, 3pm) or a day of a month (1st, 22nd).
WHEN_DIGITS = re.compile(r"(?:1[5-9]|20)\d\ds?|\d{4}[-/]\d{1,2}(?:[-/]\d{1,2})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
                         r"|\d{1,2}(?:am|pm)|\d{1,2}(?:st|nd|rd|th)")
#: An id (as `tokens` gives it): letters and digits joined by '-', '.', '_' or '/' ("INC-199", "v2.7", "orders-db-3").
ID = re.compile(r"(?=.*[^\W\d_])(?=.*\d)[^\W_]+(?:[-._/][^\W_]+)+")
#: The fewest digits of a number that names one thing ("port 5432", "exit code 137", "issue 482") rather than counts
#: ("2 kids", "45 minutes"); a number after '#' names one whatever its length ("#48").
NAMING_DIGITS = 3
#: A dotted key, file name or path: two parts of two characters or more around a dot ("spring.datasource.url",
#: "deploy.sh", "src/api/users.py"), not initials ("e.g.", "U.S.").
_DOTTED = re.compile(r"[^\W_]{2}\.[^\W_]{2}")
#: How many of the rows holding a part of an id are asked whether they hold it whole (those holding it whole rank
#: first but for long rows holding its parts often).
_HELD_CHECKED = 20
#: The most words (besides `_ASKING_WORDS` and `_LISTING_WORDS`) a query names a type with for `_typed` to look
#: its entities up in the other number too, and for `type_count` to count them: types are a word or two
#: ("Incident", "Purchase Order").
TYPE_WORDS = 3
#: How many of the entities the keyword channel ranks best for a word are asked whether their name holds it (see
#: `_names_held`): as many as a search takes as anchor candidates by default (`anchor_candidates`).
_NAMES_CHECKED = 20


@dataclass(frozen=True)
class WordMatches:
    """What the query's words find without its vector: the entities it names, and the entities, passages and facts
    (with their BM25 scores, best first) the keyword channel ranks best. A search looks them up while the query is
    embedded."""

    named: list[NodeRecord]
    nodes: list[tuple[int, float]]
    chunks: list[tuple[int, float]]
    facts: list[tuple[EdgeRecord, float]] = field(default_factory=list)


def anchor_candidates(options: SearchOptions) -> int:
    """How many of the nodes nearest the query may become anchors: 4 per anchor wanted, at least 20."""
    return max(4 * options.k_anchors, 20)


@functools.cache
def asking_terms() -> frozenset[str]:
    """The terms of `_ASKING_WORDS`, stemmed on first use (the stemmer is not loaded when the server starts)."""
    return frozenset(terms(_ASKING_WORDS))


@functools.cache
def saying_terms() -> frozenset[str]:
    """The terms of `_SAYING_WORDS` (stemmed on first use, as `asking_terms`)."""
    return frozenset(terms(_SAYING_WORDS))


@functools.cache
def listing_terms() -> frozenset[str]:
    """The terms of `_LISTING_WORDS` (stemmed on first use, as `asking_terms`)."""
    return frozenset(terms(_LISTING_WORDS))


@functools.cache
def window_terms() -> frozenset[str]:
    """The terms of `_ASKING_WORDS`, `_SAYING_WORDS`, `_PERIOD_WORDS` and `_DOING_WORDS` (stemmed on first use, as
    `asking_terms`)."""
    return asking_terms() | saying_terms() | frozenset(terms(f"{_PERIOD_WORDS} {_DOING_WORDS}"))


@functools.cache
def _consequence_terms() -> frozenset[str]:
    """The stems of `_CONSEQUENCE_WORDS` (stemmed on first use, as `asking_terms`)."""
    return frozenset(stemmed(_CONSEQUENCE_WORDS.split()))


def asks_consequence(query_text: str) -> bool:
    """Whether the query holds one of `_CONSEQUENCE_WORDS` in any form ("impacts", "affected"): read from its
    words as written, for "if" is a stop word that `tokens` leaves out."""
    return not _consequence_terms().isdisjoint(stemmed([run.casefold() for run in WORD_RUN.findall(query_text)]))


def says_when(word: str) -> bool:
    """Whether a word (as `tokens` gives it) says when, not what: `_WHEN_WORDS` (or its plural: "on Fridays"),
    `WHEN_DIGITS`."""
    return (word in _WHEN_WORDS or (word.endswith("s") and word[:-1] in _WHEN_WORDS)
            or WHEN_DIGITS.fullmatch(word) is not None)


def tells_time(word: str) -> bool:
    """Whether a word (as `tokens` gives it) says when (`says_when`) or names a span of time or places one
    (`_PERIOD_WORDS`: "this month", "last week"): for global_search's question about what changed."""
    return says_when(word) or stemmed([word])[0] in _period_terms()


@functools.cache
def _period_terms() -> frozenset[str]:
    """The terms of `_PERIOD_WORDS` (stemmed on first use, as `asking_terms`)."""
    return frozenset(terms(_PERIOD_WORDS))


class _AskedType(NamedTuple):
    """The words a query asks for the entities of a type with (`asked_type`), their terms and singular forms."""

    words: list[str]
    stems: frozenset[str]
    singular: frozenset[str]

    def names(self, type_: str) -> bool:
        """Whether a stored type is the one asked about, by its words' stems or singular forms (`_type_words`)."""
        stems, singular = _type_words(type_)
        return stems == self.stems or singular == self.singular


def asked_type(query_text: str, most: int | None = None) -> _AskedType | None:
    """The query's words besides `_ASKING_WORDS` and `_LISTING_WORDS` (as `tokens` gives them), which name a type
    when the query asks for its entities ("How many incidents have we had?": "incidents"); None when it has none, or
    more than `most`."""
    written = tokens(query_text)
    skipped = asking_terms() | listing_terms()
    asked = [(word, term) for word, term in zip(written, stemmed(written)) if term not in skipped]
    if not asked or (most is not None and len(asked) > most):
        return None
    return _AskedType([word for word, _ in asked], frozenset(term for _, term in asked),
                      frozenset(noun_form(word) for word, _ in asked))


@functools.lru_cache(maxsize=4096)
def _type_words(type_: str) -> tuple[frozenset[str], frozenset[str]]:
    """The terms of a stored type's words and their singular forms (`noun_form`), to match a query's by either
    (cached: a query about a type compares them with the types of the entities it found, most of them seen before).
    Without the joined whole that `tokens` adds ("purchase_order" gives purchase, order and it)."""
    written = [word for word in tokens(type_) if word.isalnum()]
    return frozenset(stemmed(written)), frozenset(noun_form(word) for word in written)


def query_ids(query_text: str) -> dict[str, str]:
    """The ids the query names, as written (a run of `WORD_RUN`) -> as `tokens` gives them (a joined run whole):
    words written as codes, not as prose, which a memory holds verbatim or not at all and which the vectors barely
    see. Letters and digits joined (`ID`: "INC-199", "v2.7"); a number of `NAMING_DIGITS` digits or more ("5432",
    "137") or after '#' ("#482"); a command-line option, a word of letters after a '-' that starts it ("-Xmx4g",
    "--dry-run"); a word in capitals that is no common word (`common_word`: "ECONNREFUSED", "HCI"; not "US");
    camelCase (`_camel_case`: "getUserById", "OOMKilled"; each part of a joined run alone, so not "Jean-Luc"; not
    "McKenna"); snake_case ("get_user_by_name"); a dotted key, file name or path (`_DOTTED`: "spring.datasource.url",
    "src/api/users.py"). Not a word that says when ("2026-03-15", "10AM"), nor the compounds of prose
    ("self-portrait", "artists/bands"), which writers spell several ways."""
    found: dict[str, str] = {}
    for run in WORD_RUN.finditer(query_text):
        written, word = run[0], (tokens(run[0]) or [""])[-1]  # a joined run's tokens end with the whole run
        # The character before the run: '#' before a number, '-' before an option (a run never starts after a
        # letter or digit and a '-', which would have joined it).
        before = query_text[run.start() - 1:run.start()]
        if word and not says_when(word) and (
                ID.fullmatch(word) or "_" in written or _DOTTED.search(written)
                or (word.isdigit() and (len(word) >= NAMING_DIGITS or before == "#"))
                or (before == "-" and word[0].isalpha())
                or any(_camel_case(part) for part in re.split(r"[-._/]", written))
                or (len(word) > 1 and written.isupper() and not common_word(word))):
            found.setdefault(written, word)
    return found


def _camel_case(word: str) -> bool:
    """Whether a word (as written) has a capital past its first letter and small letters ("getUserById", "OOMKilled",
    "iPhone", "UserRepo", "GitHub"), unlike a name ("Nowak") or a word in capitals ("HCI"), and is no name joined of
    two (`_joined_name`: "McKenna")."""
    return (any(char.isupper() for char in word[1:]) and any(char.islower() for char in word)
            and not _joined_name(word))


def _joined_name(word: str) -> bool:
    """Whether a word (as written) is a name with an inner capital: two capitalised parts of small letters, neither
    a common English word (`common_word`: "McKenna", "MacDonald", "DeShawn", "LaToya", "DiCaprio"). A code is built
    of words ("UserRepo", "GitHub": a hub, "HashMap", "PgBouncer"; "getUserById", "UserRepoImpl" and "DuckDB" have
    more parts); such a name joins a prefix or particle to a name, and is prose: "What is McKenna's phone number?"
    is held to the floor as a question about any other stored name is (`_names_stored`), not let through because
    McKenna is stored. The lexicon lists no proper nouns, so a product named of two such parts ("NumPy") reads as a
    name too."""
    capitals = [i for i, char in enumerate(word) if char.isupper()]
    if len(capitals) != 2 or capitals[0] != 0 or not word.isalpha() or not 2 <= capitals[1] <= len(word) - 2:
        return False
    return not any(common_word(part.casefold()) for part in (word[:capitals[1]], word[capitals[1]:]))


def held(store: GraphStore, word: str, namespace: str, named: list[NodeRecord]) -> bool:
    """Whether something stored holds the id `word` (as `tokens` gives it) whole (`_held_whole`), or an entity the
    query names (`named`) is called by it up to punctuation ("orders_db" names orders-db: `called`)."""
    return bool(called(word, named)) or _held_whole(store, word, namespace)


def _held_whole(store: GraphStore, word: str, namespace: str) -> bool:
    """Whether an entity, passage or fact holds the joined `word` as a whole (`_holding`)."""
    return any(_holding(store, kind, word, namespace) for kind in ("node", "chunk", "edge"))


def _holding(store: GraphStore, kind: str, word: str, namespace: str) -> list[int]:
    """The rows of `kind` among the `_HELD_CHECKED` the keyword channel ranks best for the id `word` (as `tokens`
    gives it) that hold it as a whole, best first: the keyword score of such a row exceeds its score for the word's
    parts alone (BM25 sums one positive share per query term a row holds)."""
    parts = " ".join(tokens(word)[:-1])
    found = store.keyword_search(kind, word, _HELD_CHECKED, namespace)
    alone = store.keyword_scores(kind, parts, [i for i, _ in found], namespace) if found and parts else {}
    # The two lookups round differently (float32, float64): the whole id's share is far above that.
    return [i for i, score in found if score > alone.get(i, 0.0) * (1 + 1e-4)]


def holding_ids(store: GraphStore, kind: str, ids: dict[str, str], namespace: str, places: int) -> set[int]:
    """The rows of `kind` that hold one of the query's ids (`query_ids`) whole (`_holding`), of the ids that at most
    `places` rows hold (the anchors or passages shown): an id that more hold singles none out ("LGBTQ" in a
    conversation about it, "UK" in an encyclopedia), and putting its holders first would only push out what the
    question's other words found."""
    held: set[int] = set()
    for word in dict.fromkeys(ids.values()):
        if len(rows := _holding(store, kind, word, namespace)) <= places:
            held.update(rows)
    return held


def is_stored(store: GraphStore, word: str, namespace: str) -> bool:
    """Whether an entity, passage or fact of the namespace holds one of the words."""
    return any(store.keyword_search(kind, word, 1, namespace) for kind in ("node", "chunk", "edge"))


def name_words(query_text: str, store: GraphStore | None = None, namespace: str = "") -> set[str]:
    """The words (as `tokens` gives them) the query writes like proper names (a capital past its first letter) and,
    given the store, those it writes otherwise that name a stored entity (`_names_held`: "nowak", "Nowak" alone)."""
    # Not a caseless script's words: without case, nothing there says a word is a name, and these are not matched
    # against stored names (every word of a Chinese question would count as a name the memory must hold).
    marked = {word for name in name_candidates(query_text, 1, proper_only=True, caseless=False)
              for word in tokens(name)}
    if store is None:
        return marked
    return marked | _names_held(store, [w for w in tokens(query_text) if w not in marked], namespace)


def name_terms(query_text: str, store: GraphStore | None = None, namespace: str = "",
               names: set[str] | None = None) -> set[str]:
    """The terms of `name_words` (`names`, when found already)."""
    if names is None:
        names = name_words(query_text, store, namespace)
    return set(terms(" ".join(names)))


def _names_held(store: GraphStore, words: list[str], namespace: str) -> set[str]:
    """Of `words` (as `tokens` gives them), those that a stored entity's name or alias writes like a proper name
    (`_proper_words`) and that are no common English word (`common_word`): "nowak" of Łukasz Nowak, "strasse" of
    Straße, "soren" of Søren Kierkegaard, whatever their case in the query, but not "team" of Payments Team.
    A query's case says little of a name: a one-word query's capital is the one any text starts with, and a search
    box is often typed in lower case; the stored name's writing and the lexicon say it instead. Words holding a
    digit are left out (numbers and ids are names by their digits already)."""
    # The lexicon first: most words of a question are common ones, and it spares their keyword searches.
    wanted = {w for w in words if not any(char.isdigit() for char in w) and not common_word(w)}
    if not wanted:
        return set()
    found = {word: [i for i, _ in store.keyword_search("node", word, _NAMES_CHECKED, namespace)] for word in wanted}
    records = {n.id: n for n in store.get_nodes({i for ids in found.values() for i in ids})}
    return {word for word, ids in found.items()
            if any(word in _proper_words(name) for i in ids if i in records
                   for name in (records[i].name, *records[i].aliases))}


@functools.lru_cache(maxsize=4096)
def _proper_words(name: str) -> frozenset[str]:
    """The words (as `tokens` gives them) a stored name writes like a proper name: those of each run holding a
    capital, the first included (a name is no sentence: "Straße", "Łukasz Nowak"; not "checkout" of the
    "checkout-service" a writer kept in lower case)."""
    return frozenset(word for run in WORD_RUN.findall(name) if any(char.isupper() for char in run)
                     for word in tokens(run))


def common_word(word: str) -> bool:
    """Whether `word` (lower case) is a common English word in one of its forms: lemminflect's lexicon knows a
    lemma for it ("team", "payments", "services"). Its lexicon keeps proper nouns apart, capitalised, so "nowak",
    "paris" or "priya" have none: a common word that title case capitalised in a stored name ("Team" of Payments
    Team) is told from a word that is a name in its own right."""
    from lemminflect import getAllLemmas  # as `ports.text.inflections`: its tables load on first use

    return bool(getAllLemmas(word))


def called(query_text: str, named: list[NodeRecord]) -> set[int]:
    """The entities of `named` (those the query names) whose name or an alias is the whole query, up to case,
    accents and punctuation (`loose_key`: "orders_db" or "Orders DB?" calls orders-db)."""
    whole = loose_key(query_text)
    return {n.id for n in named if any(loose_key(name) == whole for name in (n.name, *n.aliases))}


def fact_terms(edge: EdgeRecord) -> frozenset[str]:
    """The words of a fact besides its ends' names: its relation type's and its description's."""
    return relation_terms(edge.type) | frozenset(terms(edge.description))


@functools.lru_cache(maxsize=4096)
def relation_terms(relation: str) -> frozenset[str]:
    return frozenset(terms(relation.replace("_", " ")))
