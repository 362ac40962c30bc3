"""Entity resolution at ingest: does a new name denote an entity that is already stored?

The policy is conservative, because a wrong merge mixes two entities' facts and is hard to see, while a missed
one costs a duplicate that `merge_entities` folds in one call:

1. The same key (case, width and spacing ignored: "Journal of Mathematical Physics" and "journal of  mathematical
   physics") is the same entity, whatever the types (but see 1b): "apple" written as an Ingredient over the stored
   Organization "Apple" is "Apple", and the newest type wins. A known type changed so (`types_agree` false) may be
   a correction ("Person" to "Researcher") or another thing of the same name, which only the caller can tell:
   `KnowledgeBase.add_knowledge_graph` lists the name under `resolved`, with a hint naming both types.
1b. A name written with a type other than its same-key entity's known type goes to the one stored entity of the
   written type that has the name as an alias, when exactly one has: with the City "Paris" and the Person "Paris
   Dubois" (alias "Paris") stored, "Paris" written as a Person is "Paris Dubois" (`NameResolver.alias_owner`).
2. A name that, for exactly one stored entity of the same type, equals one of its aliases or equals its name or an
   alias up to accents and punctuation ("Aschenbrodel" / "Aschenbrödel", "Jean Luc Picard" / "Jean-Luc Picard")
   is merged into that entity; the new spelling becomes an alias. With two such entities nothing is merged.
3. A new entity whose vector is at least `NEAR_DUPLICATE_SIMILARITY` close to a stored entity of the same type is
   stored as given and reported as a possible duplicate: names like "World War I" and "World War II" sit that
   close, so similarity alone never merges.
4. A new entity whose name looks the same as a stored one's but uses letters of another script ("Maya Chen" written
   with the Cyrillic a, U+0430: the same `skeleton`) is stored as given and reported as a possible duplicate,
   whatever the types.

"Of the same type" is up to case, spacing and number (`same_type`): "Person", "persons" and "people" are one type.
An entity of type 'unknown' (`PLACEHOLDER_TYPE`: the end create_relations made for a name no entity had) is of every
type to rule 2 (`types_agree`), as its exact name is: "Acme Inc" (a company) is the placeholder "Acme Inc.".

Rules 1b and 2 look at stored entities only, and never resolve a name onto an entity that another node of the same
call names (or that another name of the call was resolved to): nodes a caller gives as distinct stay distinct,
however alike their names ("Cherry Creek, Colorado" and "Cherry Creek (Colorado)"). A relation whose ends
resolution still makes one entity is skipped and reported by `KnowledgeBase.add_knowledge_graph`, never an error.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from duckgraph.ports import GraphStore, NodeRecord, entity_key, loose_key
from duckgraph.ports.text import stemmed

#: The type of an entity whose type is not known: the placeholder create_relations makes for a relation's missing end
#: (memory_server.py), or a memory file's entity given none. It says nothing of what the entity is.
PLACEHOLDER_TYPE = "unknown"
#: Cosine similarity of node vectors above which a new entity is reported as a possible duplicate.
NEAR_DUPLICATE_SIMILARITY = 0.92
#: Calls creating more entities than this skip the similarity check (bulk loads; one vector search per entity).
NEAR_DUPLICATE_CHECK_LIMIT = 200
#: Plurals whose lemma lemminflect gives as a noun of its own: its lexicon knows "people" as a singular ("peoples"),
#: so "people" is never "person" there, while a type "Person" and a question about "people" mean the same things.
_PLURAL_OF = {"people": "person"}
#: The last run of letters of a type's key: the word whose number a type may be written in ("purchase_orders").
_LAST_WORD = re.compile(r"[^\W\d_]+$")
#: Markdown emphasis around a whole name (`unemphasised`): the same asterisks on both sides, and a name inside that
#: starts and ends with neither an asterisk nor a space.
_EMPHASIS = re.compile(r"(\*{1,3})(?![\s*])(.*?[^\s*])\1")
#: `type_key(PLACEHOLDER_TYPE)`: the type written so already (lower case, singular), without loading lemminflect.
_UNKNOWN = PLACEHOLDER_TYPE


@functools.lru_cache(maxsize=8192)
def noun_form(word: str) -> str:
    """A word (as `tokens` gives it) in the singular, to compare as a noun whatever its number: its noun lemma in
    lemminflect's lexicon ("people" and "persons" give "person", "children" "child", "criteria" "criterion"), else
    its stem ("microservices", unknown to the lexicon, gives "microservic", as "microservice" does). Cached: every
    write compares types with it (`type_key`), and search a query's words with those of the types it finds."""
    word = word.casefold()
    if not word.isalpha():
        return word
    from lemminflect import getLemma  # as `ports.text.inflections`: its tables load on first use

    # Only the lexicon: its rules for unknown words make "API" "apus" and "OS" "o"; the stem leaves them whole.
    lemmas = getLemma(word, upos="NOUN", lemmatize_oov=False)
    if not lemmas:
        return stemmed([word])[0]
    return _PLURAL_OF.get(lemmas[0], lemmas[0])


@functools.lru_cache(maxsize=8192)
def noun_variants(word: str) -> frozenset[str]:
    """A word (as `tokens` gives it) in both numbers, as lemminflect's lexicon knows them ("people": people, person,
    persons; "children": child, children); a word the lexicon does not know as a noun, alone. Cached: search asks it
    of a query's words."""
    word = word.casefold()
    if not word.isalpha():
        return frozenset((word,))
    from lemminflect import getAllInflections, getLemma

    lemmas = getLemma(word, upos="NOUN", lemmatize_oov=False)
    if not lemmas:
        return frozenset((word,))
    lemma = _PLURAL_OF.get(lemmas[0], lemmas[0])
    forms = {word, lemma, *(form for found in getAllInflections(lemma, upos="NOUN").values() for form in found)}
    return frozenset(forms | {plural for plural, singular in _PLURAL_OF.items() if singular == lemma})


@functools.lru_cache(maxsize=4096)
def type_key(type_: str) -> str:
    """`entity_key` of an entity type with its last word in the singular (`noun_form`): "Person", "PERSON",
    "Persons" and "people" are one type, "purchase_orders" and "Purchase_Order" another, while "Organization" and
    "Organ" stay two (a stem would join them)."""
    key = entity_key(type_)
    last = _LAST_WORD.search(key)
    return key if last is None else key[:last.start()] + noun_form(last[0])


def same_type(a: str, b: str) -> bool:
    """Whether two entity types are one, up to case, spacing and number (`type_key`)."""
    return type_key(a) == type_key(b)


def types_agree(a: str, b: str) -> bool:
    """Whether rule 2 may take an entity of type `a` for one of type `b`: one type (`same_type`), or either of them
    `PLACEHOLDER_TYPE`, which says nothing of what the entity is."""
    return type_key(a) in (type_key(b), _UNKNOWN) or type_key(b) == _UNKNOWN


def is_unknown_type(type_: str) -> bool:
    """Whether `type_` is `PLACEHOLDER_TYPE` (in any case or number): a type given by a write or a merge replaces it."""
    return type_key(type_) == _UNKNOWN


class NameKeys:
    """`entity_key` and `loose_key` of names, each computed once: a call names the same entities many times (a
    bulk load's edges name each of its nodes about ten times, and each key costs microseconds of Unicode work)."""

    __slots__ = ("_keys", "_loose", "_types")

    def __init__(self) -> None:
        self._keys: dict[str, str] = {}
        self._loose: dict[str, str] = {}
        self._types: dict[str, str] = {}

    def key(self, name: str) -> str:
        found = self._keys.get(name)
        if found is None:
            found = self._keys[name] = entity_key(name)
        return found

    def loose(self, name: str) -> str:
        found = self._loose.get(name)
        if found is None:
            found = self._loose[name] = loose_key(name)
        return found

    def type(self, type_: str) -> str:
        found = self._types.get(type_)
        if found is None:
            found = self._types[type_] = type_key(type_)
        return found


@dataclass
class NameResolver:
    """Finds the stored entity a new name denotes under rule 2."""

    by_alias: dict[str, list[NodeRecord]] = field(default_factory=dict)
    by_loose: dict[str, list[NodeRecord]] = field(default_factory=dict)
    keys: NameKeys = field(default_factory=NameKeys)

    def add(self, records: Iterable[NodeRecord]) -> None:
        keys = self.keys
        for record in records:
            for alias in record.aliases:
                self._index(self.by_alias, keys.key(alias), record)
            for name in (record.name, *record.aliases):
                if loose := keys.loose(name):
                    self._index(self.by_loose, loose, record)

    @staticmethod
    def _index(table: dict[str, list[NodeRecord]], key: str, record: NodeRecord) -> None:
        owners = table.setdefault(key, [])
        if all(owner.key != record.key for owner in owners):
            owners.append(record)

    def match(self, name: str, type_: str) -> NodeRecord | None:
        keys = self.keys
        for table, key in ((self.by_alias, keys.key(name)), (self.by_loose, keys.loose(name))):
            found = table.get(key)
            if not found:
                continue
            wanted = keys.type(type_)  # types_agree, with the keys computed once
            owners = [r for r in found if keys.type(r.type) in (wanted, _UNKNOWN) or wanted == _UNKNOWN]
            if len(owners) == 1:
                return owners[0]
            if owners:
                return None  # ambiguous: leave it to the caller
        return None

    def alias_owner(self, name: str, type_: str) -> NodeRecord | None:
        """Rule 1b: the one stored entity of the type `type_` (`same_type`) that has `name` as an alias; None when
        none or several have."""
        wanted = self.keys.type(type_)
        owners = [r for r in self.by_alias.get(self.keys.key(name), ()) if self.keys.type(r.type) == wanted]
        return owners[0] if len(owners) == 1 else None

    def candidates(self, name: str) -> list[NodeRecord]:
        """Every stored entity, of any type, that `name` could denote under rule 2: an alias of it, or its name or an
        alias up to accents and punctuation (for reads and suggestions, where no type is given)."""
        keys = self.keys
        found = [r for table, key in ((self.by_alias, keys.key(name)), (self.by_loose, keys.loose(name)))
                 for r in table.get(key, ())]
        return list({r.key: r for r in found}.values())


def lookup_keys(names: Sequence[str], keys: NameKeys) -> set[str]:
    """The keys `GraphStore.find_nodes` needs to see every stored entity rule 1 or 2 could match."""
    return {keys.key(n) for n in names} | {k for n in names if (k := keys.loose(n))}


def qualified(name: str, type_: str) -> str:
    """`name` told apart by its type ("apple (ingredient)"): the name to suggest for another thing than the entity
    `name` is (rule 1 makes one name up to case one entity)."""
    return f"{name} ({type_.lower()})"


def unemphasised(name: str) -> str:
    """`name` without markdown emphasis around the whole of it, as a name copied out of a chat answer or a note
    arrives ("**Alice**", "*Alice*", "***Alice***": "Alice"): the same run of one to three asterisks on both sides.
    Any other name as it is: "A*", "*nix" and "C**" keep their asterisks (symbols of a name, as `loose_key` keeps
    them). Underscores are left alone: code names are written so ("__init__"), and `loose_key` drops them anyway."""
    found = _EMPHASIS.fullmatch(name)
    return found[2] if found else name


def skeleton(name: str) -> str:
    """`loose_key` of `name` with each letter of another script that looks like a Latin letter or digit written as
    that one (`_latin_look_alikes`): two names of one skeleton look the same on screen ("Maya Chen", and "Maya Chen"
    written with the Cyrillic a) though their keys differ."""
    if name.isascii():  # nothing to map: the loose key, without loading the confusables' tables
        return loose_key(name)
    text = unicodedata.normalize("NFKC", name)  # full-width and mathematical letters are plain ones already
    latin = _latin_look_alikes(text)
    return loose_key("".join(latin.get(char, char) for char in text))


def _latin_look_alikes(text: str) -> dict[str, str]:
    """The letters of `text` from other scripts that look like a Latin letter or digit, each with that one (Unicode's
    confusables, from confusable_homoglyphs: the Cyrillic a, U+0430, as "a", the Greek Omicron as "O")."""
    from confusable_homoglyphs import confusables  # its tables (~1 MB of JSON) load on the first non-ASCII name

    latin: dict[str, str] = {}
    for found in confusables.is_confusable(text, greedy=True, preferred_aliases=[]) or ():
        char = found["character"]
        like = [g["c"] for g in found["homoglyphs"] if g["c"].isascii() and g["c"].isalnum()]
        if not char.isascii() and like:
            # Unicode writes the capital-I-like letters (the Greek Iota, the Cyrillic I) as "l", which case folding
            # keeps apart from the Latin "I" they look like: the capital is that I.
            latin[char] = "I" if like[0] == "l" and char.isupper() else like[0]
    return latin


def looks_the_same(name: str, other: str) -> str:
    """Why `name` is reported as a possible duplicate of `other`, of the same `skeleton`: the letters that differ,
    by their Unicode names, since the two read alike."""
    text = unicodedata.normalize("NFKC", name)
    letters = ", ".join(f"{unicodedata.name(char, 'U+%04X' % ord(char))} for {latin!r}"
                        for char, latin in _latin_look_alikes(text).items() if char in text)
    return f"looks the same as {other!r} but uses other letters ({letters})"


def look_alike_note(name: str, other: str) -> str:
    """create_entities' note for a new entity that `looks_the_same` as `other` (the memory tools have no merge)."""
    return (f"{looks_the_same(name, other)}: stored as an entity of its own; if both are one, delete this one "
            f"(delete_entities) and add its observations to {other!r}")


def look_alikes(store: GraphStore, namespace: str, names: Sequence[str]) -> dict[str, tuple[str, int | None]]:
    """Of `names` (those of entities being created), each that has the `skeleton` of a stored entity's name or alias
    (or of another of `names`) but not its loose key: the name it looks like and that entity's id (None for one of
    `names`). Only names holding letters of other scripts are looked at (one lookup for them all): a stored name
    written so and a new plain one are left to `duckgraph doctor`, which compares every skeleton. A write could find
    that stored name only through its skeleton in the store's name index (`find_nodes`), which holds none: its
    vector is no nearer than another name's (the other script's letters are other tokens to the model), and
    comparing every stored name is the scan doctor makes."""
    mapped = {name: shape for name in dict.fromkeys(names) if not name.isascii()
              and (shape := skeleton(name)) and shape != loose_key(name)}
    if not mapped:
        return {}
    plain = {loose_key(name): name for name in names}
    stored = store.find_nodes(namespace, set(mapped.values()))
    found: dict[str, tuple[str, int | None]] = {}
    for name, shape in mapped.items():
        owner = next(((spelling, r.id) for r in stored for spelling in (r.name, *r.aliases)
                      if loose_key(spelling) == shape), None)
        if owner is None and shape in plain:
            owner = (plain[shape], None)
        if owner is not None:
            found[name] = owner
    return found


def possible_duplicates(store: GraphStore, namespace: str, created: Sequence[NodeRecord]) -> list[dict]:
    """New entities that may be stored ones written otherwise, for the caller to merge if they agree: a name that
    looks the same as a stored one but uses other letters (`look_alikes`: whatever the types, as a reader cannot
    tell them apart; never merged, since a name may be written so on purpose), then one close to a stored entity of
    the same type (rule 3)."""
    if not created:
        return []
    import numpy as np  # loaded by then (the records carry vectors); not at import, to keep start-up light

    found = []
    alike = look_alikes(store, namespace, [r.name for r in created])
    if alike:
        vectors = {r.name: r.embedding for r in created if r.embedding is not None}
        stored = store.get_vectors("node", [i for _, i in alike.values() if i is not None])
        for record in created:
            if record.name in alike:
                other, other_id = alike[record.name]
                theirs = vectors.get(other) if other_id is None else stored.get(other_id)
                similarity = (float(np.dot(record.embedding, theirs)) / float(
                    np.linalg.norm(record.embedding) * np.linalg.norm(theirs) or 1.0)
                    if record.embedding is not None and theirs is not None else 0.0)
                found.append({"name": record.name, "similar_to": other, "type": record.type,
                              "similarity": round(similarity, 3), "reason": looks_the_same(record.name, other)})
    if len(created) > NEAR_DUPLICATE_CHECK_LIMIT:
        return found
    embedded = [record for record in created if record.embedding is not None and record.name not in alike]
    if not embedded:
        return found
    nearest = store.vector_search_batch("node", np.stack([r.embedding for r in embedded]), 1, namespace)
    hits: dict[int, tuple[NodeRecord, int, float]] = {}
    for record, near in zip(embedded, nearest):
        for node_id, similarity in near:
            if similarity >= NEAR_DUPLICATE_SIMILARITY:
                hits[id(record)] = (record, node_id, similarity)
    if not hits:
        return found
    stored_nodes = {n.id: n for n in store.get_nodes(node_id for _, node_id, _ in hits.values())}
    for record, node_id, similarity in hits.values():
        other = stored_nodes.get(node_id)
        if other is not None and same_type(other.type, record.type):
            found.append({"name": record.name, "similar_to": other.name, "type": record.type,
                          "similarity": round(similarity, 3)})
    return found


#: Names a writer gives the user, the one talking to the assistant, rather than their name; English only, compared
#: by `loose_key` (any case, "me (user)" as "me user").
SELF_REFERENCES = frozenset(loose_key(name) for name in (
    "me", "I", "myself", "user", "the user", "me (user)", "user (me)", "I (user)", "myself (user)", "the user (me)"))
#: A description that says its entity is the user: "The user", "the user, a nurse", "Is the user".
_SAYS_THE_USER = re.compile(r"\W*(?:is\s+)?the\s+user\b", re.IGNORECASE)
#: Entities a keyword search for "user" reads while looking for the one that says it is the user.
_USER_CANDIDATES = 20


def is_self_reference(name: str) -> bool:
    """Whether `name` is one of `SELF_REFERENCES`: the user, not an entity of that name."""
    return loose_key(name) in SELF_REFERENCES


def says_it_is_the_user(record: NodeRecord) -> bool:
    """An entity under a name of its own whose alias is a self-reference or whose description says "the user"."""
    return not is_self_reference(record.name) and (
        any(map(is_self_reference, record.aliases)) or bool(_SAYS_THE_USER.match(record.description or "")))


def self_reference_hint(store: GraphStore, namespace: str, created: Sequence[str], *, merge: bool = True) -> str | None:
    """What to do about the entities just created under a self-reference ("me", "User"): one entity for the user
    under their name, these as its aliases. With `merge`, the merge_entities call into the stored entity that says
    it is the user (`says_it_is_the_user`), or how to make one; without it (the memory tools have no merge), to
    write the user's facts under their name."""
    selves = [name for name in dict.fromkeys(created) if is_self_reference(name)]
    if not selves:
        return None
    stored = store.find_nodes(namespace, SELF_REFERENCES)
    stored += store.get_nodes(i for i, _ in store.keyword_search("node", "user", _USER_CANDIDATES, namespace))
    sources = list(dict.fromkeys([*(r.name for r in stored if is_self_reference(r.name)), *selves]))
    owner = next((r for r in stored if says_it_is_the_user(r)), None)
    said = (f"{' and '.join(map(repr, selves))} stand(s) for the user (an English self-reference), not someone of "
            "that name: the user is best one entity under their name, with such names as aliases")
    if not merge:
        name = repr(owner.name) if owner else "their name"
        return (f"{said}; write the user's observations and relations under {name} instead (`duckgraph doctor` "
                "lists the entities to merge)")
    if owner is not None:
        return (f"{said}: merge_entities(sources={json.dumps(sources, ensure_ascii=False)}, "
                f"target={json.dumps(owner.name, ensure_ascii=False)})")
    rest = ", then merge the others into it with merge_entities" if len(sources) > 1 else ""
    return (f"{said}: once their name is known, update_entity(name={json.dumps(sources[0], ensure_ascii=False)}, "
            f"new_name=\"<their name>\") (the old name stays an alias){rest}")
