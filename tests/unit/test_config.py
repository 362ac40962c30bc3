"""Settings layering: built-in defaults < TOML file < DUCKGRAPH_* environment < explicit overrides."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from duckgraph.core import config
from duckgraph.core.config import PluginChoice, Settings, load_settings
from duckgraph.ports import ConfigError


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config file in the developer's own config folder must not leak into these tests."""
    monkeypatch.setattr(config, "default_config_file", lambda: tmp_path / "no-such-dir" / "config.toml")


def write_toml(tmp_path: Path, text: str, name: str = "duckgraph.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


FILE = """
db = "/data/from-file.duckdb"
namespace = "file"
log_level = "INFO"

[embedder]
use = "sentence-transformers"
options = { model = "all-mpnet-base-v2", device = "cpu" }
"""


# -- defaults ----------------------------------------------------------------------------------------------


def test_defaults() -> None:
    settings = load_settings(env={})
    assert settings.namespace == "default"
    assert settings.store == PluginChoice(use="duckdb")
    assert settings.embedder == PluginChoice(use="sentence-transformers")
    assert settings.extractor is None
    assert settings.warm_up is True


def test_default_db_is_in_the_platform_user_data_dir() -> None:
    settings = load_settings(env={})
    expected = Path(platformdirs.user_data_dir("duckgraph", appauthor=False))
    assert settings.db.parent == expected
    assert settings.db.name.endswith(".duckdb")
    assert Settings().db == settings.db


# -- layering ----------------------------------------------------------------------------------------------


def test_file_overrides_defaults(tmp_path: Path) -> None:
    settings = load_settings(write_toml(tmp_path, FILE), env={})
    assert settings.db == Path("/data/from-file.duckdb")
    assert settings.namespace == "file"
    assert settings.log_level == "INFO"
    assert settings.embedder.options == {"model": "all-mpnet-base-v2", "device": "cpu"}
    assert settings.store.use == "duckdb"  # untouched sections keep their defaults


def test_env_overrides_file(tmp_path: Path) -> None:
    env = {"DUCKGRAPH_DB": "/data/from-env.duckdb", "DUCKGRAPH_NAMESPACE": "env"}
    settings = load_settings(write_toml(tmp_path, FILE), env=env)
    assert settings.db == Path("/data/from-env.duckdb")
    assert settings.namespace == "env"
    assert settings.log_level == "INFO"  # not set in the environment: the file's value stays


def test_overrides_beat_env_and_file(tmp_path: Path) -> None:
    env = {"DUCKGRAPH_DB": "/data/from-env.duckdb", "DUCKGRAPH_NAMESPACE": "env"}
    settings = load_settings(write_toml(tmp_path, FILE), env=env, db="/data/override.duckdb", namespace=None)
    assert settings.db == Path("/data/override.duckdb")
    assert settings.namespace == "env"  # an override of None means "not given"


def test_config_file_from_env(tmp_path: Path) -> None:
    path = write_toml(tmp_path, FILE)
    settings = load_settings(env={"DUCKGRAPH_CONFIG": str(path)})
    assert settings.namespace == "file"


def test_explicit_config_file_beats_the_env_variable(tmp_path: Path) -> None:
    env_file = write_toml(tmp_path, 'namespace = "env-file"', "env.toml")
    arg_file = write_toml(tmp_path, 'namespace = "arg-file"', "arg.toml")
    assert load_settings(arg_file, env={"DUCKGRAPH_CONFIG": str(env_file)}).namespace == "arg-file"


def test_default_config_file_is_read_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_toml(tmp_path, 'namespace = "user-default"')
    monkeypatch.setattr(config, "default_config_file", lambda: path)
    assert load_settings(env={}).namespace == "user-default"


def test_db_path_expands_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    settings = load_settings(env={"DUCKGRAPH_DB": "~/kb.duckdb"})
    assert settings.db == tmp_path / "kb.duckdb"


@pytest.mark.parametrize("value, expected", [("0", False), ("false", False), ("Off", False), ("no", False),
                                             ("1", True), ("yes", True), ("TRUE", True), (" on ", True)])
def test_warm_up_from_env(value: str, expected: bool) -> None:
    assert load_settings(env={"DUCKGRAPH_WARM_UP": value}).warm_up is expected


@pytest.mark.parametrize("value", ["flase", "2", "enabled", "y"])
def test_a_boolean_variable_with_another_word_is_refused(value: str) -> None:
    """A typo of "false" must not turn fetching on."""
    with pytest.raises(ConfigError) as info:
        load_settings(env={"DUCKGRAPH_FETCH_URLS": value})
    assert str(info.value) == (f"DUCKGRAPH_FETCH_URLS = {value!r}: must be true or false (1, true, yes, on; or 0, "
                               "false, no, off)")


@pytest.mark.parametrize("where", ["file", "env", "flag"])
def test_an_unknown_log_level_is_refused_with_the_levels_there_are(tmp_path: Path, where: str) -> None:
    path = write_toml(tmp_path, 'log_level = "LOUD"' if where == "file" else "")
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={"DUCKGRAPH_LOG_LEVEL": "LOUD"} if where == "env" else {},
                      log_level="LOUD" if where == "flag" else None)
    assert "log_level = 'LOUD': must be DEBUG, INFO, WARNING or ERROR" in str(info.value)


def test_a_log_level_in_lower_case_is_accepted() -> None:
    assert load_settings(env={"DUCKGRAPH_LOG_LEVEL": "debug"}).log_level == "DEBUG"


@pytest.mark.parametrize("text, shown", [('db = ""', "''"), ('db = "  "', "'  '"), ("db = [1, 2]", "[1, 2]"),
                                         ("db = 3", "3")])
def test_a_db_that_is_no_file_name_is_refused(tmp_path: Path, text: str, shown: str) -> None:
    """A list used to become a file named "[1, 2]", and "" the current folder."""
    path = write_toml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    assert f"db = {shown}: must be the path of the knowledge file" in str(info.value)
    assert str(path) in str(info.value)


def test_an_empty_db_flag_is_refused() -> None:
    with pytest.raises(ConfigError, match="db = '': must be the path of the knowledge file"):
        load_settings(env={}, db="")


def test_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKGRAPH_NAMESPACE", "from-os-environ")
    monkeypatch.delenv("DUCKGRAPH_CONFIG", raising=False)
    assert load_settings().namespace == "from-os-environ"


# -- plugin choices ----------------------------------------------------------------------------------------


def test_env_chooses_the_embedder() -> None:
    settings = load_settings(env={"DUCKGRAPH_EMBEDDER": "ollama"})
    assert settings.embedder == PluginChoice(use="ollama", options={})


def test_changing_the_plugin_drops_the_file_options_for_the_other_plugin(tmp_path: Path) -> None:
    settings = load_settings(write_toml(tmp_path, FILE), env={"DUCKGRAPH_EMBEDDER": "ollama"})
    assert settings.embedder.use == "ollama"
    assert settings.embedder.options == {}  # "model = all-mpnet-base-v2" was meant for sentence-transformers


def test_same_plugin_in_env_keeps_the_file_options(tmp_path: Path) -> None:
    settings = load_settings(write_toml(tmp_path, FILE), env={"DUCKGRAPH_EMBEDDER": "sentence-transformers"})
    assert settings.embedder.options == {"model": "all-mpnet-base-v2", "device": "cpu"}


def test_env_options_merge_over_file_options(tmp_path: Path) -> None:
    env = {"DUCKGRAPH_EMBEDDER_OPTIONS": '{"device": "cuda", "batch_size": 8}'}
    settings = load_settings(write_toml(tmp_path, FILE), env=env)
    assert settings.embedder == PluginChoice(
        use="sentence-transformers", options={"model": "all-mpnet-base-v2", "device": "cuda", "batch_size": 8}
    )


def test_env_plugin_and_options_together(tmp_path: Path) -> None:
    env = {"DUCKGRAPH_EMBEDDER": "ollama", "DUCKGRAPH_EMBEDDER_OPTIONS": '{"model": "nomic-embed-text"}'}
    settings = load_settings(write_toml(tmp_path, FILE), env=env)
    assert settings.embedder == PluginChoice(use="ollama", options={"model": "nomic-embed-text"})


def test_env_chooses_an_extractor() -> None:
    settings = load_settings(env={"DUCKGRAPH_EXTRACTOR": "ollama", "DUCKGRAPH_EXTRACTOR_OPTIONS": '{"model": "qwen3"}'})
    assert settings.extractor == PluginChoice(use="ollama", options={"model": "qwen3"})


@pytest.mark.parametrize("section, default", [("store", "duckdb"), ("embedder", "sentence-transformers")])
def test_options_alone_are_for_the_default_plugin(section: str, default: str) -> None:
    settings = load_settings(env={f"DUCKGRAPH_{section.upper()}_OPTIONS": '{"batch": 8}'})
    assert getattr(settings, section) == PluginChoice(use=default, options={"batch": 8})


def test_store_options_from_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[store]\nuse = "duckdb"\noptions = { hnsw_min_rows = 10 }\n')
    assert load_settings(path, env={}).store.options == {"hnsw_min_rows": 10}


# -- errors ------------------------------------------------------------------------------------------------


def test_invalid_options_json_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="DUCKGRAPH_EMBEDDER_OPTIONS"):
        load_settings(env={"DUCKGRAPH_EMBEDDER_OPTIONS": "{model: x}"})


def test_options_json_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="DUCKGRAPH_STORE_OPTIONS"):
        load_settings(env={"DUCKGRAPH_STORE_OPTIONS": "[1, 2]"})


def test_extractor_options_without_an_extractor_is_an_error() -> None:
    """There is no default extractor for them to go to."""
    with pytest.raises(ConfigError, match="DUCKGRAPH_EXTRACTOR_OPTIONS is set but no extractor plugin is chosen"):
        load_settings(env={"DUCKGRAPH_EXTRACTOR_OPTIONS": '{"model": "qwen3"}'})


def test_missing_config_file_from_env(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="nope.toml"):
        load_settings(env={"DUCKGRAPH_CONFIG": str(missing)})


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", env={})


def test_invalid_toml(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'namespace = "unterminated\n')
    with pytest.raises(ConfigError, match="duckgraph.toml"):
        load_settings(path, env={})


@pytest.mark.parametrize(
    "text, where",
    [
        ('namepsace = "typo"', "namepsace"),
        ('[embedder]\nuse = "sentence-transformers"\nmodel = "x"', "model"),
        ("[embedder]\noptions = {}", "use"),
        ("warm_up = [1]", "warm_up"),
    ],
)
def test_unknown_or_wrong_keys_are_errors(tmp_path: Path, text: str, where: str) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(ConfigError, match=where) as info:
        load_settings(path, env={})
    assert str(path) in str(info.value)  # the message says which file to fix


def test_unknown_override_is_an_error() -> None:
    with pytest.raises(ConfigError, match="dbpath"):
        load_settings(env={}, dbpath="/tmp/x.duckdb")
