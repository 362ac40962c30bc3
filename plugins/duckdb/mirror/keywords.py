"""The keyword index: Okapi BM25 over the words of nodes, edges and chunks (`duckgraph.ports.tokens`), in memory.

Derived data like the rest of the mirror: built from the tables at open (and after a restore), unless the file
holds it as saved from the tables as they are (`to_bytes`, saved_keywords.py), and changed by the store only after
a write has committed, for the rows the write touched (`KeywordIndex.replace`). The texts come
from `keyword_texts.py`; this module only holds and searches the words.

Each kind is an inverted index: a CSR of postings (term -> the rows holding it, with the term's count in each) built
in one numpy pass, and the rows written since in dicts. A replaced or deleted row leaves its built postings behind,
skipped by searches (a row-level tombstone), until the rows written and dropped since the build exceed a share of
the rows: then the CSR is built again from what it holds (no text is read or split again).
"""

from __future__ import annotations

import io
import json
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from duckgraph.plugins.duckdb.keyword_texts import Codes, Rows
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse

np: Any = NumpyOnFirstUse(globals())

#: Okapi BM25's term-frequency saturation and length normalisation (the usual values).
K1 = 1.2
B = 0.75
#: The postings are built again once the rows written or dropped since the last build exceed this share of the
#: rows (and REBUILD_MIN): until then written rows are read from dicts, dropped ones skipped.
REBUILD_SHARE = 0.1
REBUILD_MIN = 2_000
KINDS = ("node", "edge", "chunk")


class Vocabulary:
    """Term -> term id, shared by the kinds (an entity's name is in its node, its edges and its passages)."""

    def __init__(self) -> None:
        self.ids = Codes()

    def id_of(self, term: str) -> int:
        return self.ids[term]

    def known(self, terms: Iterable[str]) -> list[int]:
        """Ids of the distinct `terms` that some text holds, in first-seen order."""
        ids = self.ids
        return list(dict.fromkeys(ids[t] for t in terms if t in ids))


class KindIndex:
    """BM25 over the rows of one kind, by id (ids come from sequences: small and dense)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        #: Per id: its namespace code (-1: not indexed), its length in terms, whether its postings are the built ones.
        self.namespace = np.full(0, -1, dtype=np.int32)
        self.length = np.zeros(0, dtype=np.int32)
        self.built_row = np.zeros(0, dtype=bool)
        # The built postings: term t's rows are rows[ptr[t]:ptr[t+1]], with its count in each in counts.
        self.ptr = np.zeros(1, dtype=np.int64)
        self.rows = np.zeros(0, dtype=np.int32)
        self.counts = np.zeros(0, dtype=np.float32)
        #: Rows written since the build: term -> {row: count}, and row -> its terms.
        self.delta: dict[int, dict[int, int]] = {}
        self.delta_terms: dict[int, list[int]] = {}
        self.dropped = 0  # built rows replaced or deleted since the build
        #: Namespace code -> [rows, total length], for the idf and the average length of the namespace.
        self.totals: dict[int, list[int]] = {}
        #: Scores summed per row during a search (zeroed again after it).
        self._scratch = np.zeros(0, dtype=np.float32)

    # -- changes -----------------------------------------------------------------------------------------

    def _grow(self, size: int) -> None:
        if size <= len(self.namespace):
            return
        size = max(size, int(1.5 * len(self.namespace)) + 1024)
        for name, fill in (("namespace", -1), ("length", 0), ("built_row", False), ("_scratch", 0)):
            old = getattr(self, name)
            grown = np.full(size, fill, dtype=old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)

    def build(self, blocks: Iterable[tuple[Any, Any, Any, Any, Any]]) -> None:
        """Index these rows, and only these: (ids, namespace codes, lengths, the row id and term id of each word)
        blocks, in one pass (at open, after a restore)."""
        self.__init__(self.vocabulary)  # type: ignore[misc]
        parts = list(zip(*blocks)) or [[np.zeros(0, dtype=np.int64)]] * 5
        ids, codes, lengths, owners, flat = (np.concatenate(part).astype(np.int64) for part in parts)
        self._grow(int(ids.max()) + 1 if len(ids) else 0)
        self.namespace[ids] = codes
        self.length[ids] = lengths
        for code in np.unique(codes).tolist():
            self.totals[code] = [int((codes == code).sum()), int(lengths[codes == code].sum())]
        stride = int(ids.max()) + 1 if len(ids) else 1
        keys, counts = np.unique(flat * stride + owners, return_counts=True)  # one key per (term, row)
        self._install(keys // stride, keys % stride, counts)

    def _install(self, terms: Any, rows: Any, counts: Any) -> None:
        """Make the CSR from distinct (term, row, count) postings sorted by term, and mark those rows built."""
        width = len(self.vocabulary.ids) + 1
        order = np.argsort(terms, kind="stable")
        terms, rows = terms[order], rows[order]
        self.ptr = np.zeros(width + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=width), out=self.ptr[1:])
        self.rows = rows.astype(np.int32 if len(self.namespace) < 2**31 else np.int64)
        self.counts = np.asarray(counts, dtype=np.float32)[order]
        self.built_row[:] = False
        self.built_row[rows] = True
        self.delta, self.delta_terms, self.dropped = {}, {}, 0

    def _count(self, namespaces: Any, lengths: Any, sign: int) -> None:
        for code, length in zip(np.asarray(namespaces).tolist(), np.asarray(lengths).tolist()):
            total = self.totals.setdefault(code, [0, 0])
            total[0] += sign
            total[1] += sign * length

    def remove(self, ids: Iterable[int]) -> None:
        """Drop these rows (unknown ids are skipped)."""
        for row in ids:
            if row >= len(self.namespace) or self.namespace[row] < 0:
                continue
            self._count([self.namespace[row]], [self.length[row]], -1)
            self.namespace[row] = -1
            if self.built_row[row]:
                self.built_row[row] = False
                self.dropped += 1
            for term in self.delta_terms.pop(row, ()):
                postings = self.delta[term]
                del postings[row]
                if not postings:
                    del self.delta[term]

    def add(self, ids: Sequence[int], namespaces: Sequence[int], terms: Sequence[Sequence[int]]) -> None:
        """Index these rows (new ones: `remove` first what they replace)."""
        self._grow(max(ids) + 1 if ids else 0)
        for row, code, row_terms in zip(ids, namespaces, terms):
            counted = Counter(row_terms)
            for term, count in counted.items():
                self.delta.setdefault(term, {})[row] = count
            self.delta_terms[row] = list(counted)
            self.namespace[row] = code
            self.length[row] = len(row_terms)
            self._count([code], [len(row_terms)], +1)
        if len(self.delta_terms) + self.dropped > max(REBUILD_MIN, REBUILD_SHARE * self.indexed()):
            self.compact()

    def compact(self) -> None:
        """Build the CSR again from the built postings still current and the rows written since."""
        owners = np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))
        keep = self.built_row[self.rows]
        terms, rows, counts = owners[keep], self.rows[keep].astype(np.int64), self.counts[keep]
        extra = [(term, row, count) for term, postings in self.delta.items() for row, count in postings.items()]
        if extra:
            more = np.array(extra, dtype=np.int64)
            terms, rows = np.concatenate([terms, more[:, 0]]), np.concatenate([rows, more[:, 1]])
            counts = np.concatenate([counts, more[:, 2].astype(np.float32)])
        self._install(terms, rows, counts)

    # -- saved in the file ------------------------------------------------------------------------------

    _SAVED = ("namespace", "length", "built_row", "ptr", "rows", "counts")

    def saved_arrays(self) -> dict[str, Any]:
        """The arrays that make this index, compacted (no rows written since the build; see `restore`)."""
        if self.delta or self.dropped:
            self.compact()
        return {name: getattr(self, name) for name in self._SAVED}

    def restore(self, kind: str, arrays: Any, totals: dict[str, list[int]]) -> None:
        for name in self._SAVED:
            setattr(self, name, arrays[f"{kind}.{name}"])
        self.totals = {int(code): total for code, total in totals.items()}
        self._scratch = np.zeros(len(self.namespace), dtype=np.float32)

    # -- search ------------------------------------------------------------------------------------------

    def indexed(self) -> int:
        return sum(total[0] for total in self.totals.values())

    def _postings(self, term: int, code: int) -> tuple[Any, Any]:
        """The current rows of `term` in namespace `code`, and the term's count in each."""
        rows = self.rows[self.ptr[term] : self.ptr[term + 1]] if term + 1 < len(self.ptr) else self.rows[:0]
        counts = self.counts[self.ptr[term] : self.ptr[term + 1]] if term + 1 < len(self.ptr) else self.counts[:0]
        if len(rows):
            keep = self.built_row[rows] & (self.namespace[rows] == code)
            rows, counts = rows[keep], counts[keep]
        written = self.delta.get(term)
        if written:
            extra_rows = np.fromiter(written.keys(), dtype=np.int64, count=len(written))
            extra_counts = np.fromiter(written.values(), dtype=np.float32, count=len(written))
            keep = self.namespace[extra_rows] == code
            rows = np.concatenate([rows.astype(np.int64), extra_rows[keep]])
            counts = np.concatenate([counts, extra_counts[keep]])
        return rows, counts

    def search(self, terms: list[int], k: int, code: int) -> list[tuple[int, float]]:
        """The `k` best rows of namespace `code` for the query's distinct `terms`, by BM25, best first."""
        total = self.totals.get(code)
        if not terms or k <= 0 or total is None or total[0] <= 0:
            return []
        n, average = total[0], max(total[1] / total[0], 1e-9)
        scratch, touched = self._scratch, []
        for term in terms:
            rows, counts = self._postings(term, code)
            if not len(rows):
                continue
            idf = math.log(1.0 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            norm = K1 * (1.0 - B + B * self.length[rows] / average)
            scratch[rows] += (idf * counts * (K1 + 1.0) / (counts + norm)).astype(np.float32)
            touched.append(rows)
        if not touched:
            return []
        rows = np.concatenate(touched)
        scores = scratch[rows]  # a row matched by several terms appears several times, with its one sum
        scratch[rows] = 0.0
        take = min(len(rows), k * len(touched))
        best = np.argpartition(-scores, take - 1)[:take] if take < len(rows) else np.arange(len(rows))
        found = dict(zip(rows[best].tolist(), scores[best].tolist()))
        return sorted(found.items(), key=lambda item: (-item[1], item[0]))[:k]

    def scores(self, terms: list[int], rows: Sequence[int], code: int) -> dict[int, float]:
        """The BM25 score of each of `rows` (of namespace `code`) for the query's distinct `terms`, as `search` gives
        it; rows holding none of the terms are left out."""
        total = self.totals.get(code)
        wanted = np.asarray([r for r in rows if 0 <= r < len(self.namespace)], dtype=np.int64)
        if not terms or total is None or total[0] <= 0 or not len(wanted):
            return {}
        wanted = wanted[self.namespace[wanted] == code]
        n, average = total[0], max(total[1] / total[0], 1e-9)
        summed = np.zeros(len(wanted), dtype=np.float64)
        order = np.argsort(wanted)
        ordered = wanted[order]
        for term in terms:
            found, counts = self._postings(term, code)
            if not len(found):
                continue
            idf = math.log(1.0 + (n - len(found) + 0.5) / (len(found) + 0.5))
            position = np.minimum(np.searchsorted(ordered, found), len(ordered) - 1)
            hit = ordered[position] == found
            found, counts, position = found[hit], counts[hit], position[hit]
            norm = K1 * (1.0 - B + B * self.length[found] / average)
            np.add.at(summed, order[position], (idf * counts * (K1 + 1.0) / (counts + norm)).astype(np.float32))
        held = summed > 0
        return dict(zip(wanted[held].tolist(), summed[held].tolist()))

    def sizes(self) -> dict[str, Any]:
        held = sum(a.nbytes for a in (self.namespace, self.length, self.built_row, self.ptr, self.rows, self.counts,
                                      self._scratch))
        written = sum(len(p) for p in self.delta.values())
        held += 120 * written + 100 * len(self.delta_terms)  # dict entries, roughly
        return {"rows": self.indexed(), "postings": len(self.rows) + written, "written_since_build": len(self.delta_terms),
                "dropped_since_build": self.dropped, "bytes": held}


class KeywordIndex:
    """The three kinds' `KindIndex` and their shared vocabulary and namespace codes. Not locked by itself: the
    store calls it under its own lock."""

    def __init__(self) -> None:
        self.vocabulary = Vocabulary()
        self.namespace_codes = Codes()
        self.kinds = {kind: KindIndex(self.vocabulary) for kind in KINDS}
        #: Seconds the last full build (or read of the saved index) took, and which it was (health).
        self.build_seconds = 0.0
        self.read_from_file = False
        #: Whether it changed since it was built or read: what the store saves at close (`to_bytes`).
        self.changed = False

    def namespace_code(self, namespace: str) -> int:
        return self.namespace_codes[namespace]

    def build(self, rows: dict[str, Iterable[Rows]]) -> None:
        """Index exactly these rows: kind -> blocks of rows and their words."""
        start = time.perf_counter()
        self.__init__()  # type: ignore[misc]
        for kind, blocks in rows.items():
            self.kinds[kind].build(self._block_arrays(block) for block in blocks)
        self.build_seconds = time.perf_counter() - start
        self.changed = True

    def _block_arrays(self, block: Rows) -> tuple[Any, Any, Any, Any, Any]:
        """A block's ids, namespace codes, lengths, and each word's row id and term id, as arrays (lists of words
        held for a million rows would take gigabytes)."""
        terms = self.vocabulary.ids.array(block.words)
        codes = self.namespace_codes.array(block.namespaces)
        return block.ids, codes, block.lengths(), block.ids[block.owners], terms[block.codes]

    def replace(self, kind: str, dropped: Iterable[int], rows: Rows) -> None:
        """Drop the rows `dropped` of `kind`, then index `rows` (which are among them when they replace a row)."""
        index = self.kinds[kind]
        ids = rows.ids.tolist()
        self.changed = True
        index.remove(dropped)
        index.remove(ids)
        if ids:
            id_of = self.vocabulary.id_of
            index.add(ids, [self.namespace_code(ns) for ns in rows.namespaces],
                      [[id_of(w) for w in row] for row in rows.by_row()])

    def search(self, kind: str, words: list[str], k: int, namespace: str) -> list[tuple[int, float]]:
        code = self.namespace_codes.get(namespace)
        if code is None:
            return []
        return self.kinds[kind].search(self.vocabulary.known(words), k, code)

    def scores(self, kind: str, words: list[str], rows: Sequence[int], namespace: str) -> dict[int, float]:
        code = self.namespace_codes.get(namespace)
        if code is None:
            return {}
        return self.kinds[kind].scores(self.vocabulary.known(words), rows, code)

    def to_bytes(self) -> bytes:
        """The index as the store saves it in the file: only the terms some row holds and the namespaces some row
        is in, renumbered (a deleted row's words, a deleted namespace's name, must not outlive them in the file).
        Terms are runs of word characters, so a line feed joins them; namespace names go as JSON."""
        parts = {kind: index.saved_arrays() for kind, index in self.kinds.items()}
        width = len(self.vocabulary.ids)
        lengths = {}  # each kind's postings per term id, over the whole vocabulary
        for kind, part in parts.items():
            lengths[kind] = np.zeros(width, dtype=np.int64)
            counted = np.diff(part["ptr"])[:width]  # a built CSR may have a slot past the vocabulary: empty
            lengths[kind][: len(counted)] = counted
        held_terms = np.logical_or.reduce([per_term > 0 for per_term in lengths.values()])
        held_spaces = np.zeros(len(self.namespace_codes), dtype=bool)
        for part in parts.values():
            held_spaces[part["namespace"][part["namespace"] >= 0]] = True
        renumbered = np.cumsum(held_spaces) - 1
        arrays: dict[str, Any] = {}
        for kind, part in parts.items():
            ptr = np.zeros(int(held_terms.sum()) + 1, dtype=np.int64)
            np.cumsum(lengths[kind][held_terms], out=ptr[1:])  # the postings keep their order: ids only shrink
            codes = part["namespace"]
            codes = np.where(codes >= 0, renumbered[np.maximum(codes, 0)], -1).astype(codes.dtype)
            arrays.update({f"{kind}.{name}": value for name, value in {**part, "ptr": ptr, "namespace": codes}.items()})
        terms = [term for term, held in zip(self.vocabulary.ids, held_terms.tolist()) if held]
        joined = "\n".join(terms)
        if joined.count("\n") != max(len(terms) - 1, 0):
            raise ValueError("a term holds a line feed")
        head = {"namespaces": [name for name, held in zip(self.namespace_codes, held_spaces.tolist()) if held],
                "terms": len(terms),
                "totals": {kind: {int(renumbered[code]): total for code, total in index.totals.items()
                                  if held_spaces[code]} for kind, index in self.kinds.items()}}
        arrays["terms"] = np.frombuffer(joined.encode(), dtype=np.uint8)
        arrays["head"] = np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> KeywordIndex:
        """The index `to_bytes` saved."""
        start = time.perf_counter()
        index = cls()
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            terms = arrays["terms"].tobytes().decode()
            head = json.loads(arrays["head"].tobytes())
            index.vocabulary.ids.update((term, code) for code, term in enumerate(terms.split("\n") if terms else []))
            if len(index.vocabulary.ids) != head["terms"]:
                raise ValueError(f"{len(index.vocabulary.ids)} terms where {head['terms']} were saved")
            index.namespace_codes.update((name, code) for code, name in enumerate(head["namespaces"]))
            for kind, kind_index in index.kinds.items():
                kind_index.restore(kind, arrays, head["totals"][kind])
        index.build_seconds, index.read_from_file = time.perf_counter() - start, True
        return index

    def sizes(self) -> dict[str, Any]:
        """What the index holds, for health() and the benchmarks."""
        kinds = {kind: index.sizes() for kind, index in self.kinds.items()}
        vocabulary_bytes = sum(60 + len(t) for t in self.vocabulary.ids) + 40 * len(self.vocabulary.ids)
        total = sum(s["bytes"] for s in kinds.values()) + vocabulary_bytes
        return {"terms": len(self.vocabulary.ids), "megabytes": total / 2**20, "build_seconds": self.build_seconds,
                **{kind: {key: value for key, value in s.items() if key != "bytes"} for kind, s in kinds.items()}}

    def describe(self) -> str:
        """The index in words (what `duckgraph doctor` shows)."""
        sizes = self.sizes()
        rows = ", ".join(f"{kind} {sizes[kind]['rows']:,}" for kind in KINDS)
        how = "read from the file" if self.read_from_file else "built from the tables"
        return (f"BM25 in memory, {sizes['megabytes']:,.1f} MB, {how} in {sizes['build_seconds']:.2f} s at open; "
                f"rows {rows}; {sizes['terms']:,} terms")
