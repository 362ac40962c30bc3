"""Conversational memory (LoCoMo): duckgraph's `search` against dense, BM25 and their fusion on the same documents,
and whether `search` comes back empty when nothing relevant is stored.

The set, its two ways of loading and the metric are described in the evaluation README next to the data. Each
conversation goes into a fresh knowledge base file through `KnowledgeBase.add_documents` (the default stack, real
all-MiniLM-L6-v2), in one or both modes:

- turns: one document per turn (id = dia_id, title "Session N, <date>", text "Speaker: text [shares <caption>]");
- facts: one document per session observation, whose evidence is its dia_id(s);
- observations: the same facts kept as a reference memory server's user keeps them, one entity per speaker
  (`create_entities`, type "person") whose observations they are, in order; recall counts the observations
  `search` shows with its entities, in the order shown (the baselines need passages: none in this mode).

Every question of categories 1-4 is asked four ways: `search` (KnowledgeBase.search, default options but
max_passages = the largest k), dense (the same embedder, cosine alone), BM25 (Okapi, k1 = 1.2, b = 0.75,
lower-cased alphanumeric tokens, English stop words removed) and their reciprocal rank fusion (k = 60). The
documents of the top k passages give the turns they stand for; recall@k = |gold & those turns| / |gold|.
The floor: each conversation's questions (categories 1-4) asked of every other conversation's memory should come
back empty (no passages, entities or relations), its own should not; category 5 (adversarial) is reported too.
Usage:

    python contrib/bench/locomo.py --data ../shared/eval/locomo [--conversations 26,30]
        [--modes turns,facts,observations]
        [--limit N] [--keep FOLDER] [--json-out PATH]

Progress goes to stderr, the tables to stdout, the same numbers (and each question's ranks) as JSON to --json-out.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from musique import batched, dense_top, latency, make_services, progress  # also keeps the model offline

from duckgraph.core.domain import memory_server  # noqa: E402
from duckgraph.core.domain.knowledge_base import KnowledgeBase  # noqa: E402
from duckgraph.core.domain.model import (  # noqa: E402
    MAX_DOCUMENTS_PER_CALL, DocumentInput, MemoryEntityInput, SearchResult)
from duckgraph.core.domain.texts import passage_text  # noqa: E402
from duckgraph.ports import Embedder  # noqa: E402

MODES = ("turns", "facts", "observations")
RECALL_KS = (5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
METHODS = ("search", "dense", "bm25", "rrf")
BM25_K1, BM25_B = 1.2, 0.75
RRF_K = 60
#: NLTK's English stop word list, as it is: the baseline stays fixed whatever tokenizer duckgraph itself uses.
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his himself
she she's her hers herself it it's its itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above below to from up down in
out on off over under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've now d ll m o re ve y
ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn
mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())


# -- the data ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    evidence: tuple[str, ...]  # the turns (dia_ids) it stands for
    speaker: str = ""  # whose turn, or whom the fact is about


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    gold: frozenset[str]  # evidence turns; empty for a few questions the set gives none


@dataclass
class Conversation:
    name: str
    raw: dict[str, Any]
    questions: list[Question]

    def sessions(self) -> list[tuple[int, str]]:
        """(N, "Session N, <date>") for every session that has turns, in order."""
        numbers = sorted(int(key.split("_")[1]) for key, value in self.raw.items()
                         if re.fullmatch(r"session_\d+", key) and isinstance(value, list))
        return [(n, f"Session {n}, {self.raw.get(f'session_{n}_date_time', '')}".rstrip(", ")) for n in numbers]

    def documents(self, mode: str) -> list[Document]:
        return turn_documents(self) if mode == "turns" else fact_documents(self)  # observations: the facts


def evidence_ids(value: Any) -> tuple[str, ...]:
    """dia_ids from an evidence field: a list or a single id, some written "D8:6; D9:17" in one string."""
    items = value if isinstance(value, list) else [value]
    return tuple(dict.fromkeys(part for item in items if isinstance(item, str)
                               for part in re.split(r"[;,\s]+", item) if part))


def turn_documents(conversation: Conversation) -> list[Document]:
    documents = []
    for n, title in conversation.sessions():
        for turn in conversation.raw[f"session_{n}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            documents.append(Document(id=turn["dia_id"], title=title, text=text, evidence=(turn["dia_id"],)))
    return documents


def fact_documents(conversation: Conversation) -> list[Document]:
    documents = []
    for n, title in conversation.sessions():
        for speaker, facts in (conversation.raw.get(f"session_{n}_observation") or {}).items():
            for i, fact in enumerate(facts):
                documents.append(Document(id=f"S{n}:{speaker}:{i}", title=title, text=fact[0],
                                          evidence=evidence_ids(fact[1] if len(fact) > 1 else []), speaker=speaker))
    return documents


def load_conversations(folder: Path, names: Sequence[str] | None, limit: int | None) -> list[Conversation]:
    """Every NAME.json of the folder (or the named ones), with at most `limit` questions each."""
    if not folder.is_dir():
        sys.exit(f"error: {folder} is not a folder (--data must hold LoCoMo conversations as NAME.json)")
    files = {path.stem: path for path in sorted(folder.glob("*.json"))}
    names = list(names or files)
    missing = [name for name in names if name not in files]
    if missing or not names:
        sys.exit(f"error: no conversation {', '.join(missing)} in {folder}" if missing
                 else f"error: {folder} holds no NAME.json conversation")
    conversations = []
    for name in names:
        raw = json.loads(files[name].read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or "qa" not in raw:
            sys.exit(f"error: {files[name]} is not a LoCoMo conversation (no `qa`)")
        questions = [Question(text=str(qa["question"]), category=int(qa["category"]),
                              gold=frozenset(evidence_ids(qa.get("evidence") or [])))
                     for qa in raw["qa"][:limit]]
        conversations.append(Conversation(name=name, raw=raw, questions=questions))
    return conversations


# -- the baselines ----------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOP_WORDS]


class BM25:
    """Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)), never negative) over texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.docs = [Counter(tokens(text)) for text in texts]
        self.lengths = [sum(doc.values()) for doc in self.docs]
        self.average = statistics.fmean(self.lengths) if self.lengths else 0.0
        frequency = Counter(term for doc in self.docs for term in doc)
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def ranking(self, query: str) -> list[int]:
        """Indices of the texts sharing a term with the query, best first (ties in text order)."""
        terms = [t for t in set(tokens(query)) if t in self.idf]
        scores = {}
        for i, (doc, length) in enumerate(zip(self.docs, self.lengths)):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * length / self.average)
            score = sum(self.idf[t] * doc[t] * (BM25_K1 + 1) / (doc[t] + norm) for t in terms if t in doc)
            if score > 0:
                scores[i] = score
        return sorted(scores, key=lambda i: (-scores[i], i))


def fuse(*rankings: Sequence[str]) -> list[str]:
    """Reciprocal rank fusion (k = 60) of ranked id lists."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1 / (RRF_K + rank)
    return sorted(scores, key=lambda item: -scores[item])


def is_empty(result: SearchResult) -> bool:
    return not (result.passages or result.nodes or result.anchors or result.edges)


# -- metrics ----------------------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: dict[str, tuple[str, ...]], gold: frozenset[str], k: int) -> float:
    """Share of the gold turns among those the top k documents stand for."""
    turns = {turn for doc_id in ranked[:k] for turn in evidence.get(doc_id, ())}
    return len(gold & turns) / len(gold)


def share(flags: Sequence[bool]) -> float | None:
    return round(100 * statistics.fmean(flags), 1) if flags else None


def recall_table(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean recall x100 of each method at each k: overall and per category."""
    groups = {"all": rows, **{f"{c} {name}": [r for r in rows if r["category"] == c] for c, name in CATEGORIES.items()}}
    table = {}
    for group, subset in groups.items():
        means: dict[str, Any] = {"n": len(subset)}
        for method in METHODS:
            for k in RECALL_KS:
                values = [row["recall"][method][str(k)] for row in subset if method in row["recall"]]
                means[f"{method} R@{k}"] = round(100 * statistics.fmean(values), 1) if values else None
        table[group] = means
    return table


# -- one conversation in one mode -------------------------------------------------------------------------


def load(kb: KnowledgeBase, documents: Sequence[Document]) -> float:
    started = time.perf_counter()
    for batch in batched(documents, MAX_DOCUMENTS_PER_CALL):
        kb.add_documents([DocumentInput(id=d.id, title=d.title, text=d.text) for d in batch])
    return time.perf_counter() - started


def load_observations(kb: KnowledgeBase, documents: Sequence[Document]) -> float:
    """The facts as each speaker's observations, in one create_entities call."""
    started = time.perf_counter()
    kept: dict[str, list[str]] = {}
    for d in documents:
        kept.setdefault(d.speaker, []).append(d.text)
    memory_server.create_entities(kb, [MemoryEntityInput(name=speaker, entityType="person",
                                                         observations=list(dict.fromkeys(texts)))
                                       for speaker, texts in kept.items()])
    return time.perf_counter() - started


def observation_ids(documents: Sequence[Document]) -> dict[tuple[str, str], str]:
    """(speaker, fact) -> the first document stating it: an entity keeps a fact stated twice once."""
    ids: dict[tuple[str, str], str] = {}
    for d in documents:
        ids.setdefault((d.speaker, d.text), d.id)
    return ids


def observations_shown(result: SearchResult, ids: dict[tuple[str, str], str]) -> dict[str, list[str]]:
    """The facts (`observation_ids`) behind the observations `search` shows, entity by entity in the order shown."""
    return {"search": [ids[key] for node in result.nodes for text in node.observations
                       if (key := (node.name, text)) in ids]}


def rankings(kb: KnowledgeBase, bm25: BM25, documents: Sequence[Document], question: str,
             result: SearchResult) -> dict[str, list[str]]:
    """Document ids in rank order, by method: search's passages as returned (those of a passage's text shown once,
    its `also_in`, after it), and the three baselines."""
    dense = dense_top(kb, question, len(documents))  # every document, by its best chunk
    lexical = [documents[i].id for i in bm25.ranking(question)]
    shown = (document_id for p in result.passages
             for document_id in (p.document_id, *(other.rpartition("#")[0] for other in p.also_in)))
    return {"search": list(dict.fromkeys(shown)), "dense": dense,
            "bm25": lexical, "rrf": fuse(dense, lexical)}


def evaluate(kb: KnowledgeBase, conversation: Conversation, others: Sequence[Conversation],
             mode: str) -> dict[str, Any]:
    documents = conversation.documents(mode)
    observed = mode == "observations"
    progress(f"{conversation.name} ({mode}): loading {len(documents)} {'facts' if observed else 'documents'}")
    load_seconds = load_observations(kb, documents) if observed else load(kb, documents)
    first = observation_ids(documents) if observed else {}
    evidence: dict[str, tuple[str, ...]] = {}
    for d in documents:  # a fact an entity keeps once stands for the evidence of every document stating it
        at = first.get((d.speaker, d.text), d.id)
        evidence[at] = tuple(dict.fromkeys([*evidence.get(at, ()), *d.evidence]))
    bm25 = BM25([passage_text(d.title, d.text) for d in documents])
    k = max(RECALL_KS)

    def search(question: str) -> SearchResult:
        return kb.search(question, max_passages=k)

    if conversation.questions:
        search(conversation.questions[0].text)  # the first query pays the model's start; time the rest
    rows, own_empty, adversarial_empty, timings = [], [], [], []
    skipped = 0
    for i, question in enumerate(conversation.questions, start=1):
        if i % 25 == 0:
            progress(f"  {conversation.name} ({mode}): question {i}/{len(conversation.questions)}")
        started = time.perf_counter()
        result = search(question.text)
        timings.append(time.perf_counter() - started)
        if question.category == ADVERSARIAL:
            adversarial_empty.append(is_empty(result))
            continue
        if question.category not in CATEGORIES:
            continue
        own_empty.append(is_empty(result))
        if not question.gold:
            skipped += 1
            continue
        ranked = (observations_shown(result, first) if observed
                  else rankings(kb, bm25, documents, question.text, result))
        rows.append({"question": question.text, "category": question.category, "gold": sorted(question.gold),
                     "recall": {m: {str(k): recall_at(ranked[m], evidence, question.gold, k) for k in RECALL_KS}
                                for m in ranked},
                     "top": {m: ranked[m][:k] for m in ranked}})
    foreign = {other.name: [is_empty(search(q.text)) for q in other.questions if q.category in CATEGORIES]
               for other in others}
    return {"documents": len(documents), "chunks": kb.stats()["chunks"], "load_seconds": round(load_seconds, 1),
            "rows": rows, "no_evidence_skipped": skipped, "own_empty": own_empty,
            "adversarial_empty": adversarial_empty, "foreign_empty": foreign, "search_seconds": timings}


def run_mode(conversations: Sequence[Conversation], mode: str, folder: Path,
             embedder: Embedder | None) -> tuple[dict[str, Any], Embedder]:
    """Every conversation in this mode, each in a fresh file; one embedder (one model load) for all of them."""
    per_conversation = {}
    for conversation in conversations:
        others = [c for c in conversations if c is not conversation]
        services = make_services(folder / f"locomo-{conversation.name}-{mode}.duckdb", embedder=embedder)
        embedder = services.knowledge_base.embedder
        with services.knowledge_base as kb:
            per_conversation[conversation.name] = evaluate(kb, conversation, others, mode)
    return summarise(per_conversation), embedder


def summarise(per_conversation: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Recall over all conversations' questions together; the floor per conversation: its questions asked of the
    other conversations' memories (should be empty) and of its own (should not be)."""
    rows = [row for result in per_conversation.values() for row in result["rows"]]
    floor = {}
    for name, result in per_conversation.items():
        asked_elsewhere = [flag for other in per_conversation.values()
                           for flag in other["foreign_empty"].get(name, [])]
        floor[name] = {"other memory: n": len(asked_elsewhere), "other memory: empty %": share(asked_elsewhere),
                       "own: n": len(result["own_empty"]), "own: empty %": share(result["own_empty"]),
                       "category 5: n": len(result["adversarial_empty"]),
                       "category 5: empty %": share(result["adversarial_empty"])}
    timings = [t for result in per_conversation.values() for t in result["search_seconds"]]
    return {"recall": recall_table(rows), "floor": floor, "search_latency": latency(timings) if timings else None,
            "conversations": {name: {key: result[key] for key in ("documents", "chunks", "load_seconds",
                                                                  "no_evidence_skipped")}
                              for name, result in per_conversation.items()},
            "per_question": rows}


# -- output -----------------------------------------------------------------------------------------------


def cell(value: float | None, width: int = 12) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.1f}"


def print_mode(mode: str, summary: dict[str, Any]) -> None:
    observed = mode == "observations"
    loaded = ", ".join(f"{name}: {c['documents']} {'facts' if observed else 'documents'}"
                       for name, c in summary["conversations"].items())
    shown = "observations shown" if observed else "passages"
    print(f"LoCoMo, {mode} mode ({loaded}); recall x100 of the turns behind the top k {shown}")
    print(f"{'':<22}{'n':>5}" + "".join(f"{m + ' R@' + str(k):>12}" for k in RECALL_KS for m in METHODS))
    for group, values in summary["recall"].items():
        print(f"{group:<22}{values['n']:>5}"
              + "".join(cell(values[f"{m} R@{k}"]) for k in RECALL_KS for m in METHODS))
    skipped = sum(c["no_evidence_skipped"] for c in summary["conversations"].values())
    if skipped:
        print(f"({skipped} questions of categories 1-4 give no evidence: left out of recall, kept in the floor)")
    print("floor: share of searches that come back empty (no passages, entities or relations)")
    print(f"{'':<22}{'asked of another memory':>28}{'its own questions':>28}{'category 5 (own)':>28}")
    print(f"{'conversation':<22}" + f"{'n':>14}{'empty %':>14}" * 3)
    for name, values in summary["floor"].items():
        print(f"{name:<22}" + "".join(f"{values[f'{part}: n']:>14}" + cell(values[f"{part}: empty %"], 14)
                                      for part in ("other memory", "own", "category 5")))
    if summary["search_latency"]:
        lat = summary["search_latency"]
        print(f"search latency in process (query embedded): p50 {lat['median_ms']} ms, p95 {lat['p95_ms']} ms, "
              f"n = {lat['n']}")
    print()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding LoCoMo conversations as NAME.json")
    parser.add_argument("--conversations", help="comma-separated NAMEs (default: every NAME.json of the folder)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--limit", type=int, help="ask only each conversation's first N questions")
    parser.add_argument("--keep", type=Path, metavar="FOLDER",
                        help="keep the knowledge base files in FOLDER (default: temporary, removed)")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or set(args.modes) - set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    args.conversations = [c.strip() for c in args.conversations.split(",")] if args.conversations else None
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    conversations = load_conversations(args.data.expanduser(), args.conversations, args.limit)
    folder = args.keep.expanduser() if args.keep else Path(tempfile.mkdtemp(prefix="duckgraph-locomo-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.keep and any(folder.glob("locomo-*.duckdb")):
        sys.exit(f"error: {folder} already holds locomo-*.duckdb files; each run needs fresh knowledge bases")
    report: dict[str, Any] = {"conversations": [c.name for c in conversations], "recall_ks": list(RECALL_KS),
                              "modes": {}}
    started = time.perf_counter()
    embedder = None
    try:
        for mode in args.modes:
            report["modes"][mode], embedder = run_mode(conversations, mode, folder, embedder)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    for mode, summary in report["modes"].items():
        print_mode(mode, summary)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        progress(f"results written to {args.json_out}")
    return report


if __name__ == "__main__":
    main()
