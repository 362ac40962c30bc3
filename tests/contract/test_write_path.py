"""Every change to a knowledge base goes through `KnowledgeBase.writing()`, checked on the source with `ast`.

The write path binds the embedder, holds other writes back and commits; a use case that retyped those steps
would get them subtly wrong one day (a vector from another model, a read that is stale at commit time).
"""

from __future__ import annotations

import ast
from tests.contract.test_architecture import PACKAGES, ROOT, source_files

WRITE_PATH = "core/domain/knowledge_base.py"
#: What the write path keeps to itself.
PRIVATE = {"_write_lock", "_vectors_ready"}
#: The store's methods that commit a change.
COMMITS = {"write", "restore"}
STORE = {"store", "_store"}


def _store_commits(tree: ast.AST) -> list[int]:
    """Lines calling `store.write(...)`/`store.restore(...)` (also `x.store.write(...)`, `self._store...`)."""
    return [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in COMMITS
        and ((isinstance(node.func.value, ast.Attribute) and node.func.value.attr in STORE)
             or (isinstance(node.func.value, ast.Name) and node.func.value.id in STORE))
    ]


def _private_uses(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in PRIVATE]


def _found(folders: list[str], lines_of) -> list[str]:
    found = []
    for folder in folders:
        for path in source_files(folder):
            relative = path.relative_to(ROOT).as_posix()
            if relative != WRITE_PATH:
                tree = ast.parse(path.read_text(encoding="utf-8"))
                found += [f"{relative}:{line}" for line in lines_of(tree)]
    return found


def test_only_the_knowledge_base_touches_its_write_lock_and_embedder_binding() -> None:
    assert _found(sorted(PACKAGES), _private_uses) == []


def test_the_core_commits_only_through_the_write_path() -> None:
    # plugins/ are the stores themselves; the core reaches them only through a Writer.
    assert _found(["core"], _store_commits) == []


def test_the_checks_see_what_they_look_for() -> None:
    write_path = ast.parse((ROOT / WRITE_PATH).read_text(encoding="utf-8"))
    assert _store_commits(write_path) and _private_uses(write_path)
    sample = ast.parse("def f(kb, store):\n    kb._vectors_ready()\n    kb.store.write(b)\n    store.restore(s)\n")
    assert (_store_commits(sample), _private_uses(sample)) == ([3, 4], [2])
