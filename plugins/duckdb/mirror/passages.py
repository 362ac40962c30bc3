"""The passage side of the graph mirror: documents, their chunks and the entities each chunk mentions, as the
passage walk and the search output read them. `GraphMirror` holds the arrays (loaded and reset with the rest of
the graph); this part keeps what only passages need in a module of its own."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.columns import grow, nat, time_value
from duckgraph.ports import reads_on

log = logging.getLogger(__name__)
np: Any = NumpyOnFirstUse(globals())


class PassageMirror:
    """Documents, chunks and mentions; mixed into `GraphMirror`, whose `_reset` creates the state used here."""

    def put_documents(self, namespaces: Sequence[str], ids: Sequence[str], titles: Sequence[str | None],
                      times: Sequence[Any] | None = None) -> None:
        first = len(self.documents)
        for key, title in zip(zip(namespaces, ids), titles):
            self.documents.append((key[1], title or ""))
            self.document_codes[key] = len(self.documents) - 1  # a replaced document's old entry is left unused
        self.document_time = grow(self.document_time, len(self.documents), nat())
        if times is not None and len(self.documents) > first:
            self.document_time[first:len(self.documents)] = [time_value(t) for t in times]

    def drop_documents(self, keys: Sequence[tuple[str, str]]) -> None:
        """Documents deleted (namespace, id), after `drop_chunks` of their chunks; their entries are left unused."""
        for key in keys:
            self.document_codes.pop(key, None)

    def add_chunks(self, ids: Sequence[int], namespaces: Sequence[str], document_ids: Sequence[str],
                   ordinals: Sequence[int], texts: Sequence[str], sections: Sequence[str | None] = ()) -> None:
        """Chunks of documents already given to `put_documents`: all the chunks of each. A chunk held already (the
        unchanged passage of a replaced document) moves to its document's new entry and ordinal."""
        if len(ids):
            self.chunk_section.update((i, s) for i, s in zip(np.asarray(ids).tolist(), sections) if s)
            ids = np.asarray(ids, dtype=np.int64)
            if self.chunk_text is not None:  # its text is counted again below
                self.text_bytes -= sum(len(self.chunk_text.get(i, "").encode()) for i in ids.tolist())
            size = int(ids.max()) + 1
            self.chunk_live = grow(self.chunk_live, size, False)
            self.chunk_live[ids] = True
            self.chunk_document = grow(self.chunk_document, size, -1)
            codes = self.document_codes
            self.chunk_document[ids] = [codes.get(key, -1) for key in zip(namespaces, document_ids)]
            self.chunk_ordinal = grow(self.chunk_ordinal, size, 0)
            self.chunk_ordinal[ids] = ordinals
            self._note_reading_order(ids)
            if self.chunk_text is not None:
                self.chunk_text.update(zip(ids.tolist(), texts))
                self.text_bytes += sum(len(text.encode()) for text in texts)
                if self.text_bytes > self.text_budget:
                    self.chunk_text = None
                    log.info("passage texts outgrew the %d MB kept in memory: searches read them from the file",
                             self.text_budget // 2**20)

    def _note_reading_order(self, ids: Any) -> None:
        """Note, among the chunks `ids` (all the chunks of their documents), those whose next chunk in their document
        is not the next id (`chunk_after`, and `chunk_before` the other way): a replaced document keeps the ids of
        its unchanged passages among the new ones. Any other chunk reads on at the next id (`adjacent_chunks`)."""
        if self.chunk_after or self.chunk_before:
            for i in ids.tolist():  # noted again below if still so
                self.chunk_after.pop(i, None)
                self.chunk_before.pop(i, None)
        codes, ordinals = self.chunk_document[ids], self.chunk_ordinal[ids]
        order = np.lexsort((ordinals, codes))
        ids, codes, ordinals = ids[order], codes[order], ordinals[order]
        apart = ((codes[1:] == codes[:-1]) & (codes[1:] >= 0) & (ordinals[1:] == ordinals[:-1] + 1)
                 & (ids[1:] != ids[:-1] + 1))
        for before, after in zip(ids[:-1][apart].tolist(), ids[1:][apart].tolist()):
            self.chunk_after[before] = after
            self.chunk_before[after] = before

    def drop_chunks(self, ids: Sequence[int]) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[ids < len(self.chunk_live)]
        self.chunk_live[ids] = False
        for i in ids.tolist():
            self.chunk_section.pop(i, None)
            self.chunk_after.pop(i, None)
            self.chunk_before.pop(i, None)
        if self.chunk_text is not None:
            self.text_bytes -= sum(len(self.chunk_text.pop(i, "").encode()) for i in ids.tolist())

    def add_mentions(self, chunk_ids: Sequence[int], node_ids: Sequence[int]) -> None:
        chunk_ids, node_ids = list(chunk_ids), list(node_ids)
        if not chunk_ids:
            return
        self.chunks_of.add(node_ids, chunk_ids)
        self.nodes_of.add(chunk_ids, node_ids)
        if self.chunks_of.stale() or self.nodes_of.stale():
            self._compact_mentions()

    def copy_mentions(self, target: int, sources: Sequence[int]) -> None:
        _, chunks = self.node_chunk_pairs(list(sources))
        self.add_mentions(chunks.tolist(), [target] * len(chunks))

    def _compact_mentions(self) -> None:
        nodes, chunks = self.chunks_of.pairs()
        live = self._node_live(nodes) & self._chunk_live(chunks)
        pairs = np.unique(np.stack([nodes[live], chunks[live]], axis=1), axis=0) if live.any() else np.zeros((0, 2), np.int64)
        self.chunks_of.build(pairs[:, 0], pairs[:, 1])
        self.nodes_of.build(pairs[:, 1], pairs[:, 0])

    def _chunk_live(self, ids: Any) -> Any:
        inside = (ids >= 0) & (ids < len(self.chunk_live))
        result = np.zeros(len(ids), dtype=bool)
        result[inside] = self.chunk_live[ids[inside]]
        return result

    def _stored_chunks(self, ids: Sequence[int]) -> tuple[Any, Any]:
        """(ids, document codes) of the stored ones of the chunk `ids`."""
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[self._chunk_live(ids)]
        codes = self.chunk_document[ids]
        return ids[codes >= 0], codes[codes >= 0]

    def chunk_documents(self, ids: Sequence[int]) -> dict[int, str]:
        """The document id of each stored one of the chunk `ids`."""
        ids, codes = self._stored_chunks(ids)
        return {i: self.documents[c][0] for i, c in zip(ids.tolist(), codes.tolist())}

    def adjacent_chunks(self, ids: Sequence[int], namespace: str) -> dict[int, tuple[int | None, int | None]]:
        """For each stored one of the chunk `ids` in `namespace`, the chunks stored just before and after it when
        they go on with its text (`reads_on`; None otherwise): the neighbouring ids, or those `_note_reading_order`
        noted; a few array reads per chunk."""
        found: dict[int, tuple[int | None, int | None]] = {}
        for chunk_id in self._stored_chunks(ids)[0].tolist():
            if (here := self._place(chunk_id, namespace)) is not None:
                before = self.chunk_before.get(chunk_id, chunk_id - 1)
                after = self.chunk_after.get(chunk_id, chunk_id + 1)
                found[chunk_id] = (before if reads_on(self._place(before, namespace), here) else None,
                                   after if reads_on(here, self._place(after, namespace)) else None)
        return found

    def _place(self, chunk_id: int, namespace: str) -> tuple[str, int, str, Any] | None:
        """(document id, ordinal, title, time or None) of a live chunk of a current document of `namespace`, else
        None."""
        if not 0 <= chunk_id < len(self.chunk_live) or not self.chunk_live[chunk_id]:
            return None
        code = int(self.chunk_document[chunk_id])
        if code < 0 or self.document_codes.get((namespace, self.documents[code][0])) != code:
            return None
        document_id, title = self.documents[code]
        return document_id, int(self.chunk_ordinal[chunk_id]), title, self.document_time[code].item()  # NaT: None

    def chunk_times(self, ids: Iterable[int]) -> dict[int, Any]:
        """The time of each stored one of the chunk `ids` whose document has one."""
        ids, codes = self._stored_chunks(list(ids))
        times = self.document_time[codes]
        timed = ~np.isnat(times)
        return dict(zip(ids[timed].tolist(), times[timed].tolist()))

    def timed_chunks(self, namespace: str, after: Any, before: Any) -> Any:
        """The stored chunks (sorted ids) of `namespace`'s current documents timed in [after, before) (None:
        unbounded): array reads, and a dictionary look-up per document so timed."""
        times = self.document_time[: len(self.documents)]
        inside = ~np.isnat(times)
        if after is not None:
            inside &= times >= time_value(after)
        if before is not None:
            inside &= times < time_value(before)
        codes = [code for code in np.flatnonzero(inside).tolist()
                 if self.document_codes.get((namespace, self.documents[code][0])) == code]
        size = min(len(self.chunk_live), len(self.chunk_document))
        return np.flatnonzero(self.chunk_live[:size] & np.isin(self.chunk_document[:size], codes))

    def chunk_records(self, ids: Sequence[int]) -> list[Any] | None:
        """ChunkRecords of the stored ones of `ids`, or None while the texts are not held in memory."""
        from duckgraph.ports import ChunkRecord

        if self.chunk_text is None:
            return None
        ids, codes = self._stored_chunks(ids)
        return [ChunkRecord(id=i, document_id=self.documents[code][0], ordinal=ordinal, text=self.chunk_text[i],
                            section=self.chunk_section.get(i, ""))
                for i, code, ordinal in zip(ids.tolist(), codes.tolist(), self.chunk_ordinal[ids].tolist())]

    def document_titles(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        found = ((i, self.document_codes.get((namespace, i))) for i in ids)
        return {i: self.documents[code][1] for i, code in found if code is not None}

    def mentioned_chunks(self, chunk_ids: Iterable[int]) -> set[int]:
        """Those of the chunks that mention some node."""
        return set(self.chunk_node_pairs(list(set(chunk_ids)))[0].tolist())

    def chunks_mentioning(self, node_ids: Sequence[int], limit: int) -> list[tuple[int, int]]:
        """(chunk, node) pairs of the mentions of the nodes, by node then chunk; the first `limit`."""
        nodes, chunks = self.node_chunk_pairs(list(node_ids))
        return list(zip(chunks.tolist(), nodes.tolist()))[: max(int(limit), 0)]
