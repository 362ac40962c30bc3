"""What the keyword index holds of each row: the terms of its texts (`ports.terms`: words, stemmed).

- node: name, aliases, type, description, every observation, and its properties' string and number values;
- edge: the fact as a sentence, "<source name> <type words> <target name>: <description>" (as
  core/domain/texts.py's `edge_text` writes it for the edge's vector);
- chunk: the passage's text and its document's title.

Nodes and edges are read from the graph mirror (which holds all of these, observations included), passages from
the tables. Building the index at open splits hundreds of thousands of texts, so the splitting is done in bulk
(`tokenize`): one regular expression pass over many texts at once, each distinct run of letters expanded into its
words once; an edge's words are its ends' name words (each name split once) and its type's, gathered by numpy.
The result is the same as `terms` applied to each text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.ports import terms, tokens
from duckgraph.ports.text import stemmed
from duckgraph.ports.text import WORD_RUN  # the tokenizer's own runs, so that the bulk split finds the same ones

np: Any = NumpyOnFirstUse(globals())

#: Rows read or split at once when the whole index is built.
BLOCK = 200_000
#: Between texts split together: not ASCII, so it never occurs inside the ASCII texts split in bulk, and not a word
#: character, so no run crosses it.
_SEPARATOR = "\uffff"
_RUN_OR_SEPARATOR = re.compile(WORD_RUN.pattern + "|" + _SEPARATOR)

_CHUNKS = (
    # a passage's words include its section's (as the text its vector is computed from does)
    "SELECT c.id, c.namespace, d.title, CASE WHEN c.section = '' THEN c.text ELSE c.section || ' ' || c.text END "
    "FROM chunks c "
    "LEFT JOIN documents d ON d.namespace = c.namespace AND d.id = c.document_id WHERE {rows} ORDER BY c.id"
)


class Codes(dict):
    """Distinct strings -> 0, 1, 2, ... in first-seen order; `codes[s]` gives a new one a code (at C speed through
    `map(codes.__getitem__, ...)` for those already seen)."""

    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        return code

    def array(self, strings: Any) -> Any:
        return np.fromiter(map(self.__getitem__, strings), dtype=np.int64)

    def listed(self) -> list[str]:
        return list(self)


@dataclass
class Rows:
    """The words of some rows: row `ids[owners[i]]` holds the word `words[codes[i]]` (a word once for each time it
    occurs; in no particular order, which BM25 ignores)."""

    ids: Any
    namespaces: list[str]
    owners: Any
    codes: Any
    words: list[str]

    @classmethod
    def of_lists(cls, ids: Sequence[int], namespaces: list[str], words: Sequence[Sequence[str]]) -> Rows:
        """Rows from each row's list of words."""
        codes = Codes()
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        owners = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
        flat = np.fromiter(map(codes.__getitem__, (w for row in words for w in row)), dtype=np.int64,
                           count=int(lengths.sum()))
        return cls(np.asarray(ids, dtype=np.int64), list(namespaces), owners, flat, codes.listed())

    def lengths(self) -> Any:
        return np.bincount(self.owners, minlength=len(self.ids))

    def by_row(self) -> list[list[str]]:
        """Each row's words."""
        order = np.argsort(self.owners, kind="stable")
        bounds = np.cumsum(self.lengths())[:-1]
        words = self.words
        return [[words[c] for c in part.tolist()] for part in np.split(self.codes[order], bounds)]


def tokenize(texts: Sequence[str], words: Codes) -> tuple[Any, Any]:
    """The terms of each of `texts` as `terms` gives them: (text index, code in `words`) per term.

    The ASCII texts are split together: one pass of the tokenizer's regular expression over all of them, then each
    distinct run expanded into its terms once. The others (rare) are split one by one."""
    ascii_texts = [i for i, text in enumerate(texts) if text.isascii()]
    owners, codes = _tokenize_ascii([texts[i] for i in ascii_texts], words)
    owners = np.asarray(ascii_texts, dtype=np.int64)[owners] if len(owners) else owners
    others = [i for i, text in enumerate(texts) if not text.isascii()]
    if not others:
        return owners, codes
    split = [terms(texts[i]) for i in others]
    lengths = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    more_owners = np.repeat(np.asarray(others, dtype=np.int64), lengths)
    more_codes = words.array(w for row in split for w in row)
    return np.concatenate([owners, more_owners]), np.concatenate([codes, more_codes])


def _tokenize_ascii(texts: list[str], words: Codes) -> tuple[Any, Any]:
    empty = np.zeros(0, dtype=np.int64)
    if not texts:
        return empty, empty
    runs = Codes()
    runs[_SEPARATOR]  # code 0
    # ASCII: casefold is lower(), and the separator is not in any text
    found = runs.array(_RUN_OR_SEPARATOR.findall(_SEPARATOR.join(texts).casefold()))
    separator = found == 0
    owners = np.cumsum(separator)[~separator]
    found = found[~separator]
    # each distinct run's words (a run joined by '-', '.', '_' or '/' gives its parts and itself; stop words none)
    expanded = [tokens(run) for run in runs.listed()]
    flat = stemmed([w for run in expanded for w in run])  # one call for all the runs' words
    ptr = np.zeros(len(expanded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, expanded), dtype=np.int64, count=len(expanded)), out=ptr[1:])
    owners_of, codes = gather(ptr, words.array(flat), found)
    return owners[owners_of], codes


def gather(ptr: Any, data: Any, picks: Any) -> tuple[Any, Any]:
    """The rows `picks` of the CSR (`ptr`, `data`), one after the other: (position in `picks`, value) per value."""
    lengths = ptr[picks + 1] - ptr[picks]
    owners = np.repeat(np.arange(len(picks), dtype=np.int64), lengths)
    starts = np.repeat(ptr[picks] - (np.cumsum(lengths) - lengths), lengths)
    return owners, data[starts + np.arange(int(lengths.sum()), dtype=np.int64)]


def _csr(owners: Any, values: Any, rows: int) -> tuple[Any, Any]:
    order = np.argsort(owners, kind="stable")
    ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=rows), out=ptr[1:])
    return ptr, values[order]


# -- the rows of each kind -------------------------------------------------------------------------------------


def rows_of(con: Any, graph: Any, kind: str, ids: Sequence[int]) -> Rows:
    """The words of the stored rows among `ids` (the others are left out)."""
    if kind == "chunk":
        if not len(ids):
            return Rows.of_lists([], [], [])
        listed = f"c.id IN (SELECT unnest({sql.JSON_IDS % 1}))"
        return _chunk_rows(con.execute(_CHUNKS.format(rows=listed), [sql.json_list(sorted(set(ids)))]).fetchall())
    return _node_rows(graph, ids) if kind == "node" else _edge_rows(graph, ids)


def all_rows(con: Any, graph: Any, kind: str) -> Iterator[Rows]:
    """The words of every row of `kind`, block by block of ids."""
    if kind == "chunk":
        top = con.execute("SELECT max(id) FROM chunks").fetchone()[0]
        for start in range(0, (top or 0) + 1, BLOCK):
            yield _chunk_rows(con.execute(_CHUNKS.format(rows=f"c.id BETWEEN {start} AND {start + BLOCK - 1}")).fetchall())
        return
    every = graph.node_texts()[0] if kind == "node" else graph.edge_texts()[0]
    for start in range(0, len(every), BLOCK):
        block = every[start : start + BLOCK]
        yield _node_rows(graph, block) if kind == "node" else _edge_rows(graph, block)


def _node_rows(graph: Any, ids: Any) -> Rows:
    ids, namespaces, names, types, aliases, descriptions, properties, observations = graph.node_texts(ids)
    texts = [
        " ".join([name, type_, *alias, description or "", *(observed or ()), *_values(props)])
        for name, type_, alias, description, props, observed in zip(
            names, types, aliases, descriptions, properties, observations)
    ]
    words = Codes()
    owners, codes = tokenize(texts, words)
    return Rows(ids, namespaces, owners, codes, words.listed())


def _edge_rows(graph: Any, ids: Any) -> Rows:
    ids, namespaces, sources, targets, type_codes, type_names, descriptions = graph.edge_texts(ids)
    words = Codes()
    # each end's name and each type split once, then gathered for every edge
    ends, end_of = np.unique(np.concatenate([sources, targets]), return_inverse=True)
    name_ptr, name_words = _csr(*tokenize(list(graph.node_names(ends)), words), len(ends))
    types, type_of = np.unique(type_codes, return_inverse=True)
    type_ptr, type_words = _csr(*tokenize([type_names[t].replace("_", " ").lower() for t in types.tolist()], words),
                                len(types))
    described = np.flatnonzero(np.not_equal(descriptions, None))
    description_owners, description_words = tokenize(list(descriptions[described]), words)
    parts = [gather(name_ptr, name_words, end_of[: len(ids)]), gather(type_ptr, type_words, type_of.reshape(-1)),
             gather(name_ptr, name_words, end_of[len(ids) :]), (described[description_owners], description_words)]
    owners = np.concatenate([p[0] for p in parts])
    codes = np.concatenate([p[1] for p in parts])
    return Rows(ids, namespaces, owners, codes, words.listed())


def _chunk_rows(rows: list[tuple[Any, ...]]) -> Rows:
    # as core/domain/texts.py's passage_text: the title in front unless the text starts with it
    texts = [f"{title} {text}" if title and not text.startswith(title) else text for _, _, title, text in rows]
    words = Codes()
    owners, codes = tokenize(texts, words)
    return Rows(np.asarray([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], owners, codes,
                words.listed())


def _values(properties: str | None) -> list[str]:
    """The string and number values of a node's properties (JSON), nested ones included."""
    if not properties or properties == "{}":
        return []
    found: list[str] = []
    stack = [json.loads(properties)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
            found.append(str(value))
    return found
