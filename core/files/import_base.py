"""What both imports share (core/files/import_.py's duckgraph export, core/files/memory_import.py's memory
server file): the plan of what an import writes, the base class that embeds and writes it in the import's one
transaction, and the words for a name that is an alias of several stored entities."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.ingest import Progress, embed_in_batches
from duckgraph.core.domain.resolution import NameResolver, types_agree
from duckgraph.core.files.import_summary import ImportSummary, add_written
from duckgraph.ports import InvalidInputError, NodeRecord, Snapshot, WriteSummary

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase


def ambiguous(resolver: NameResolver, name: str, type_: str) -> list[str]:
    """The stored entities of `type_` (or 'unknown', `types_agree`) that `name` could each be by resolution's rule 2
    (an alias, or the name or an alias up to accents and punctuation), when there are several: `NameResolver.match`
    then finds none."""
    owners = sorted({r.name for r in resolver.candidates(name) if types_agree(r.type, type_)})
    return owners if len(owners) > 1 else []


def ambiguous_message(name: str, owners: list[str]) -> str:
    listed = ", ".join(map(repr, owners))
    return (f"the entity {name!r} is not stored, but it is an alias of several stored entities ({listed}): which one "
            "the file means cannot be told; nothing was imported: write the exact name of one of them in the file "
            "(or a name of its own to keep it apart), or drop the alias from all but one of them with update_entity")

@dataclass
class Plan:
    """What an import will write, and what still needs a vector."""

    snapshot: Snapshot = field(default_factory=Snapshot)
    #: (item, text) pairs to embed: the item's `embedding` is set from the text's vector.
    to_embed: list[tuple[Any, str]] = field(default_factory=list)


class Import:
    """One import of one file: its errors name the file and line, and its plan is embedded and written in one
    restore stream."""

    def __init__(self, kb: KnowledgeBase, source: str, progress: Progress | None, into: str | None) -> None:
        self.kb = kb
        self.into = into  # the namespace every line goes to, if the caller chose one
        self.from_namespace: str | None = None  # with `into`: the one namespace the file's lines name
        self.store = kb.store
        self.source = source
        self.progress = progress

    def _fail(self, number: int, message: str) -> InvalidInputError:
        return InvalidInputError(f"{self.source}:{number}: {message}")

    def _embed_and_restore(self, restore: Callable[[Snapshot], WriteSummary], plan: Plan,
                           summary: ImportSummary) -> ImportSummary:
        embed_in_batches(self.kb.embedder, plan.to_embed, self.progress, "embedding")
        summary.texts_embedded += len(plan.to_embed)
        add_written(summary, restore(plan.snapshot))
        return summary

    def _existing_nodes(self, keys: dict[str, set[str]]) -> dict[tuple[str, str], NodeRecord]:
        """Stored nodes by (namespace, key), for the keys wanted in each namespace (exact keys only)."""
        found: dict[tuple[str, str], NodeRecord] = {}
        for namespace, wanted in keys.items():
            for node in self.store.find_nodes(namespace, wanted):
                if node.key in wanted:
                    found[(namespace, node.key)] = node
        return found

