"""No import cycles between duckgraph's modules, imports inside functions included.

An import moved into a function to break a cycle still makes one: the two modules need each other, and
which one loads first decides whether it works. Only imports under `if TYPE_CHECKING:` are left out, as they
never run. Checked on the source with `ast`, so the whole package is seen, not just what one test imports.
"""

from __future__ import annotations

import ast

from tests.contract.test_architecture import PACKAGES, imported_from, module_name, source_files


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, package: str, modules: set[str] | dict[str, object]) -> set[str]:
    """The `modules` a module's code imports, outside TYPE_CHECKING blocks. `from a import b` imports the
    module a.b when there is one, else (a name defined in it) the module a."""
    found: set[str] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = imported_from(node, package)
            found.update(f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return found & set(modules)


def import_graph(sources: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
    """Module -> the duckgraph modules it imports, from {module: (its package, its code)}."""
    return {name: _imported(ast.parse(code), package, sources) - {name} for name, (package, code) in sources.items()}


def _duckgraph_sources() -> dict[str, tuple[str, str]]:
    sources = {}
    for folder in PACKAGES:
        for path in source_files(folder):
            name = module_name(path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            sources[name] = (package, path.read_text(encoding="utf-8"))
    return sources


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """For every module on a cycle, the shortest cycle through it (each cycle once, from its smallest name)."""
    found: set[tuple[str, ...]] = set()
    for start in sorted(graph):
        path = _shortest_path(graph, start, start)
        if path:
            turn = path.index(min(path[:-1]))
            found.add(tuple([*path[turn:-1], *path[:turn], path[turn]]))
    return [list(cycle) for cycle in sorted(found)]


def _shortest_path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """Breadth-first: the shortest import chain from `start` to `goal` (at least one step), or None."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for other in sorted(graph.get(module, ())):
                if other == goal:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), goal]
                if other not in came_from and other != start:
                    came_from[other] = module
                    following.append(other)
        frontier = following
    return None


def test_no_import_cycles() -> None:
    found = [" -> ".join(cycle) for cycle in cycles(import_graph(_duckgraph_sources()))]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_the_checker_sees_cycles_through_functions_and_not_type_checking_blocks() -> None:
    code = {
        "a": "from duckgraph.core import b\n",
        "b": "def f():\n    from .c import thing\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from duckgraph.core import d\n"
             "import duckgraph.core.a\n",
        "d": "from duckgraph.core.c import thing\n",
    }
    graph = import_graph({f"duckgraph.core.{name}": ("duckgraph.core", text) for name, text in code.items()})
    assert graph["duckgraph.core.c"] == {"duckgraph.core.a"}
    assert cycles(graph) == [["duckgraph.core.a", "duckgraph.core.b", "duckgraph.core.c", "duckgraph.core.a"]]
