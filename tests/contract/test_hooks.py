"""Meta-tests on the plugin hooks (after Datasette's): every hook is documented, tested and discoverable."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path

import pytest

from duckgraph.core import plugin_manager as core_plugins
from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.plugin_manager import ENTRY_POINT_GROUP, build_plugin_manager, create, factories
from duckgraph.ports import Embedder, hookspecs

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _hookspecs() -> dict[str, object]:
    return {
        name: function
        for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(function, "duckgraph_spec")
    }


HOOKS = sorted(_hookspecs())


def test_there_are_hooks() -> None:
    assert {"register_embedders", "register_stores", "register_extractors"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_one_line_docstring(hook: str) -> None:
    doc = _hookspecs()[hook].__doc__
    assert doc and doc.strip(), f"hookspec {hook} has no docstring"
    assert "\n" not in doc.strip(), f"hookspec {hook} docstring should be one line"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_takes_the_register_callback(hook: str) -> None:
    assert list(inspect.signature(_hookspecs()[hook]).parameters) == ["register"]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_called_by_the_core(hook: str) -> None:
    # A hookspec no plugin kind maps to would be a hook that is never called.
    assert hook in core_plugins._HOOKS.values()


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_tested(hook: str) -> None:
    this_file = Path(__file__).resolve()
    test_files = [p for p in TESTS.rglob("test_*.py") if p.resolve() != this_file]
    mentioning = [p for p in test_files if hook in p.read_text(encoding="utf-8")]
    assert mentioning, f"no test under tests/ (other than this meta-test) mentions the hook {hook}"


def _documentation() -> str:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    docs = ROOT / "docs"
    if docs.is_dir():
        text += "\n".join(p.read_text(encoding="utf-8") for p in sorted(docs.rglob("*.md")))
    return text


def test_readme_has_a_plugins_section() -> None:
    readme = ROOT / "README.md"
    assert readme.is_file(), "README.md is missing"
    assert re.search(r"^#+\s*Plugins\b", readme.read_text(encoding="utf-8"), re.MULTILINE), (
        "README.md has no 'Plugins' section documenting the hooks"
    )


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook: str) -> None:
    assert re.search(rf"\b{hook}\b", _documentation()), f"the hook {hook} is not mentioned in README.md or docs/"


# -- discovery by entry point --------------------------------------------------------------------------------


PLUGIN_MODULE = "duckgraph_tiny_plugin"
PLUGIN_SOURCE = '''
from duckgraph.ports import Embedder, hookimpl


class TinyEmbedder(Embedder):
    """The example of docs/plugins.md, verbatim in spirit: plain class attributes for id and dimensions."""

    id = "tiny:v1"
    dimensions = 4

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def embed_batch(self, texts):
        import numpy as np

        return np.array([[len(t), 1.0, 0.0, self.scale] for t in texts], dtype=np.float32)


@hookimpl
def register_embedders(register):
    register("tiny", TinyEmbedder)
'''


@pytest.fixture
def installed_tiny_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A third-party package 'installed' on sys.path: a module and a dist-info folder with its entry point."""
    (tmp_path / f"{PLUGIN_MODULE}.py").write_text(textwrap.dedent(PLUGIN_SOURCE), encoding="utf-8")
    dist_info = tmp_path / "duckgraph_tiny_plugin-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: duckgraph-tiny-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntiny = {PLUGIN_MODULE}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield PLUGIN_MODULE
    finally:
        # monkeypatch takes tmp_path off sys.path afterwards; the imported module must go too.
        sys.modules.pop(PLUGIN_MODULE, None)


def test_entry_point_plugin_is_discovered(installed_tiny_plugin: str) -> None:
    pm = build_plugin_manager(load_entry_points=True)
    try:
        assert pm.has_plugin("tiny")
        # Other installed plugin packages (contrib/duckgraph-openai in CI) are found beside it.
        assert "duckgraph-tiny-plugin" in [dist.metadata["Name"] for _, dist in pm.list_plugin_distinfo()]
        found = factories(pm, "embedder")
        assert {"tiny", "sentence-transformers"} <= set(found)
        embedder = create(pm, "embedder", "tiny", scale=2.0)
        assert isinstance(embedder, Embedder)
        assert embedder.id == "tiny:v1"
        assert embedder.embed_documents(["abc"]).shape == (1, 4)
    finally:
        pm.unregister(name="tiny")
    assert "tiny" not in factories(pm, "embedder")


def test_entry_point_plugin_is_chosen_by_settings(installed_tiny_plugin: str, tmp_path: Path) -> None:
    config_file = tmp_path / "duckgraph.toml"
    config_file.write_text("", encoding="utf-8")  # not the developer's own config file
    settings = load_settings(
        config_file,
        env={"DUCKGRAPH_EMBEDDER": "tiny", "DUCKGRAPH_EMBEDDER_OPTIONS": '{"scale": 3}'},
        db=tmp_path / "kb.duckdb",
    )
    services = bootstrap(settings)  # the default plugin manager loads entry points
    try:
        assert services.knowledge_base.embedder.id == "tiny:v1"
        assert services.knowledge_base.embedder.scale == 3
    finally:
        services.plugin_manager.unregister(name="tiny")


def test_entry_points_are_not_loaded_when_disabled(installed_tiny_plugin: str) -> None:
    pm = build_plugin_manager(load_entry_points=False)
    assert not pm.has_plugin("tiny")
    assert "tiny" not in factories(pm, "embedder")
    assert PLUGIN_MODULE not in sys.modules
