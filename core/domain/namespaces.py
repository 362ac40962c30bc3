"""Namespaces: several memories in one file. Every row carries its namespace and every read answers within one;
this module says what a valid name is, lists the namespaces of a file and deletes one."""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.core.domain.moments import iso_utc
from duckgraph.ports import InvalidInputError, NotFoundError, WriteBatch

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import NamespaceDeleted, NamespacesResult

MAX_NAMESPACE_CHARS = 100
#: Letters, digits and - _ . / (a project's folder name or "team/project"): safe in a log line, a file name part
#: and a command line without quoting.
NAMESPACE_PATTERN = r"^[A-Za-z0-9_./-]{1,100}$"
_VALID = re.compile(NAMESPACE_PATTERN)
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_./-]+")
#: The most namespaces a hint names (a file of one namespace per project may hold hundreds).
HINT_NAMESPACES = 10

#: Said by a search, global search or other read (see `empty_namespace_hint`) in a namespace that holds nothing: a misspelt namespace reads like a memory
#: that never heard of it.
EMPTY_NAMESPACE = ("The namespace {namespace!r} holds nothing yet. If the memory is in another one, "
                   "list_namespaces (`duckgraph namespaces`) shows those there are.")
#: EMPTY_NAMESPACE as the reference memory server's tools hear it: they have no list_namespaces, so only the command
#: is named.
_EMPTY_NAMESPACE_MEMORY_TOOLS = EMPTY_NAMESPACE.replace("list_namespaces (`duckgraph namespaces`)",
                                                        "`duckgraph namespaces` (on the command line)")


def empty_namespace_hint(kb: KnowledgeBase, namespace: str, *, memory_tools: bool = False) -> str | None:
    """EMPTY_NAMESPACE for a namespace that holds nothing, else None: a read that found nothing says so, so that a
    misspelt namespace does not read as a memory that never heard of what was asked. `memory_tools`: said to the
    reference memory server's tools, in words that name no tool they lack."""
    kb.open()
    if namespace in kb.store.namespaces():
        return None
    return (_EMPTY_NAMESPACE_MEMORY_TOOLS if memory_tools else EMPTY_NAMESPACE).format(namespace=namespace)


def check_namespace(name: object) -> str:
    """`name` if it is a valid namespace; otherwise an InvalidInputError that says what a valid one is."""
    # fullmatch: with match, the pattern's "$" also matches before a final newline, and "alpha\n" passed as a
    # look-alike of "alpha".
    if isinstance(name, str) and _VALID.fullmatch(name):
        return name
    # A name too long is given by its length, as argument_errors gives a long text: echoed whole, it would bury the
    # rule.
    shown = f"({len(name):,} characters)" if isinstance(name, str) and len(name) > MAX_NAMESPACE_CHARS else repr(name)
    raise InvalidInputError(
        f"invalid namespace {shown}: use 1 to {MAX_NAMESPACE_CHARS} ASCII letters (a-z, A-Z), digits (0-9), '-', '_', '.' or '/'"
    )


def namespace_from_folder(folder: str) -> str | None:
    """A valid namespace made of a folder's name (other characters become '-'), or None if the name is blank.

    A name with letters a namespace cannot hold ("Café", "東京") gets a short hash of the whole name after what is
    left ("Caf-1f0e3dad"): replaced alone, "Café" and "Cafü" would share one memory, and every name written in
    another script would fall back to the same one."""
    folder = unicodedata.normalize("NFC", folder.strip())
    name = _INVALID_CHARS.sub("-", folder).strip("-")
    if not folder.isascii():
        digest = hashlib.sha256(folder.encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAMESPACE_CHARS - len(digest) - 1]}-{digest}".lstrip("-")
    return name[:MAX_NAMESPACE_CHARS] or None


def list_namespaces(kb: KnowledgeBase, default: str | None = None) -> NamespacesResult:
    """Every namespace of the file with its counts and last write (a deletion is a write), and the caller's default
    one (`default`, else the knowledge base's), listed even while it is empty. One whose only rows are its log of
    deletions is listed with zero counts: its texts are still in the file until delete_namespace."""
    from duckgraph.core.domain.model import NamespaceInfo, NamespacesResult

    default = kb.resolve_namespace(default)
    kb.open()
    found = {s["namespace"]: s for s in kb.store.namespace_summaries()}
    found.setdefault(default, {"namespace": default, "nodes": 0, "edges": 0, "documents": 0, "last_write": None})
    return NamespacesResult(namespaces=[
        NamespaceInfo(name=name, entities=s["nodes"], relations=s["edges"], documents=s["documents"],
                      last_write=_iso(s["last_write"]), default=name == default)
        for name, s in sorted(found.items())
    ])


def delete_namespace(
    kb: KnowledgeBase, namespace: str, confirm: str, default: str | None = None
) -> NamespaceDeleted:
    """Delete everything of `namespace` (entities, relations, documents, their vectors and index entries, and its
    log of what writes deleted, which recent_changes reads) in one transaction. `confirm` must repeat the name. The
    caller's default namespace (`default`, else the knowledge base's) is emptied: it stays the default."""
    from duckgraph.core.domain.model import NamespaceDeleted

    namespace = check_namespace(namespace)
    default = kb.resolve_namespace(default)
    if confirm != namespace:
        raise InvalidInputError(f"to delete the namespace {namespace!r} and everything in it, repeat its name in "
                                f"`confirm` (got {confirm!r}); nothing was deleted")
    from duckgraph.core.files.export import PAGE, read_all

    with kb.writing(vectors=False) as writer:  # read under the write lock: nothing is added to it meanwhile
        store = kb.store
        nodes = read_all(lambda offset: store.list_nodes(namespace, offset=offset, limit=PAGE))
        edges = read_all(lambda offset: store.list_edges(namespace, offset=offset, limit=PAGE, include_expired=True))
        documents = read_all(lambda offset: store.list_documents(namespace, offset=offset, limit=PAGE))
        # One that holds only log lines (everything deleted by hand) is listed, and its log is deleted here.
        listed = {s["namespace"] for s in store.namespace_summaries()}
        if namespace not in listed and namespace != default:
            raise NotFoundError(f"there is no namespace {namespace!r}: {namespace_hint(namespace, listed)}; nothing "
                                "was deleted")
        holding = store.stats(namespace)["edges"]  # those that hold now, as list_namespaces counted them
        writer.commit(WriteBatch(delete_nodes=[n.id for n in nodes], delete_edges=[e.id for e in edges],
                                 delete_documents=[(namespace, d.id) for d in documents],
                                 drop_communities=[namespace], forget_deletions=[(namespace, None, None)]))
    left = "emptied; it stays the default namespace" if namespace == default else "deleted"
    return NamespaceDeleted(namespace=namespace, entities=len(nodes), relations=holding, documents=len(documents),
                            message=f"namespace {namespace!r} {left}")


#: A name's last member of a series: its final run of digits ("team-2025", "v2", "client1"), or one letter after
#: a separator ("proj-b", "team/a"); what comes before it is the series' stem.
_SERIES_NUMBER = re.compile(r"(.*?)([0-9]+)")
_SERIES_LETTER = re.compile(r"(.*[-_./])([A-Za-z])")


def same_series(name: str, other: str) -> bool:
    """Whether `name` and `other` are two members of one series (proj-a and proj-b, client1 and client2, team-2025
    and team-2026, v1 and v2): the same stem, to the letter's case, and each ending in a member of the same kind
    (a number, or one letter after a separator) that is another number or letter. Such names are as near as a
    typo's, but one is started after the other on purpose. A slip in the stem ("proj_a", "projet-a" for "proj-a"),
    in the member's case ("proj-A"), a number written otherwise ("team-07" for "team-7") or a member added to a
    name that has none ("work2" for "work") is no series."""
    for pattern, same in ((_SERIES_NUMBER, lambda a, b: int(a) == int(b)),
                          (_SERIES_LETTER, lambda a, b: a.casefold() == b.casefold())):
        mine, theirs = pattern.fullmatch(name), pattern.fullmatch(other)
        if mine and theirs:
            return mine[1] == theirs[1] and not same(mine[2], theirs[2])
    return False


def meant_namespaces(name: str, names: Iterable[str], *, series: bool = True) -> list[str]:
    """The namespaces of `names` (the file's) that `name`, not among them, likely meant: those the same but for
    case, else those of the nearest spelling; empty when none is near. `namespace_hint` names them, and ingest and
    import refuse to start a new namespace so near an existing one (core/cli_checks.py). With `series=False`, those
    of a series with `name` (`same_series`: proj-a for proj-b) are not meant: a suggestion for a name not found may
    name them (the user may have meant proj-a), a refusal to start one may not (proj-b is started on purpose)."""
    by_folded: dict[str, list[str]] = {}
    for other in sorted(set(names) - {name}):
        if series or not same_series(name, other):
            by_folded.setdefault(other.casefold(), []).append(other)
    if meant := by_folded.get(name.casefold(), []):
        return meant
    near = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=0.7)
    return by_folded[near[0]] if near else []


def namespace_hint(name: str, names: Iterable[str], *, series: bool = True) -> str:
    """What to say of a namespace `name` that is not among `names` (the file's): the one it likely meant (the same
    but for case, else a near spelling; `series` as for `meant_namespaces`), then those there are. The one text of
    delete_namespace and the commands export, stats, ingest and import, so that a namespace missed by a letter's
    case ("Work" for "work") is caught before it is emptied, exported or written into."""
    names = sorted(set(names) - {name})
    if not names:
        return "the file holds no namespace yet"
    meant = meant_namespaces(name, names, series=series)
    shown = ", ".join(map(repr, names[:HINT_NAMESPACES]))
    if len(names) > HINT_NAMESPACES:
        shown += f" and {len(names) - HINT_NAMESPACES} more (`duckgraph namespaces` lists them all)"
    case = " (names are case-sensitive)" if meant and meant[0].casefold() == name.casefold() else ""
    said = f"did you mean {' or '.join(map(repr, meant))}{case}? The" if meant else "the"
    return f"{said} file's namespaces are {shown}"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso_utc(moment, "seconds")
