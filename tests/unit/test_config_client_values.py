"""Settings as MCP clients pass them: env values written as in a shell ("$HOME/notes/memory.duckdb") but never
expanded by one, relative paths that depend on the client's working folder, empty values, mistyped variable names.
Through the real load_settings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from duckgraph.core import config
from duckgraph.core.config import KNOWN_VARIABLES, SETTING_VARIABLES, load_settings, unknown_variables
from duckgraph.ports import ConfigError


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own, no user config file, and a current folder (the client's) apart from both."""
    monkeypatch.setattr(config, "default_config_file", lambda: tmp_path / "no-such-dir" / "config.toml")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NOTES_FOLDER", raising=False)
    (tmp_path / "client").mkdir()
    monkeypatch.chdir(tmp_path / "client")
    return tmp_path / "home"


# -- ~, $NAME and ${NAME} ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["$HOME/notes/memory.duckdb", "${HOME}/notes/memory.duckdb",
                                   "~/notes/memory.duckdb"])
def test_a_db_variable_is_expanded_as_a_shell_would(home: Path, value: str) -> None:
    assert load_settings(env={"DUCKGRAPH_DB": value}).db == home / "notes" / "memory.duckdb"


def test_a_db_in_the_file_and_the_flag_are_expanded_too(home: Path, tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('db = "${HOME}/from-file.duckdb"\n', encoding="utf-8")
    assert load_settings(file, env={}).db == home / "from-file.duckdb"
    # An MCP client's args are not expanded either: "args": ["serve", "--db", "$HOME/..."].
    assert load_settings(file, env={}, db="$HOME/flag.duckdb").db == home / "flag.duckdb"


@pytest.mark.parametrize("where", ["env", "file", "flag"])
def test_a_variable_that_is_not_set_is_refused(tmp_path: Path, where: str) -> None:
    file = tmp_path / "c.toml"
    file.write_text('db = "$NOTES_FOLDER/memory.duckdb"\n' if where == "file" else "", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(file, env={"DUCKGRAPH_DB": "$NOTES_FOLDER/memory.duckdb"} if where == "env" else {},
                      db="${NOTES_FOLDER}/memory.duckdb" if where == "flag" else None)
    assert "$NOTES_FOLDER" in str(info.value) or "${NOTES_FOLDER}" in str(info.value)
    assert "is not set, so the path cannot be expanded" in str(info.value)
    assert "write the whole path, starting with / or ~/" in str(info.value)


# -- relative paths ------------------------------------------------------------------------------------------


def test_a_relative_db_from_the_environment_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={"DUCKGRAPH_DB": "memory.duckdb"})
    assert str(info.value) == (
        "invalid settings (from DUCKGRAPH_* variables or flags): db = 'memory.duckdb': a relative path from "
        "DUCKGRAPH_DB would be taken from the folder duckgraph is started in, which each MCP client chooses (each "
        "would silently get a memory of its own): write the whole path, starting with / or ~/ (only a path given "
        "on the command line is taken from the current folder)")


def test_a_relative_db_in_the_config_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('db = "notes/memory.duckdb"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=f"a relative path from the config file {file} would be taken"):
        load_settings(file, env={})


def test_a_relative_db_flag_is_taken_from_the_current_folder(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('db = "relative-in-file.duckdb"\n', encoding="utf-8")
    # The flag overrides the file's and the environment's relative values, so theirs are never used.
    settings = load_settings(file, env={"DUCKGRAPH_DB": "relative.duckdb"}, db="memory.duckdb")
    assert settings.db == tmp_path / "client" / "memory.duckdb"


def test_the_config_file_path_follows_the_same_rules(home: Path, tmp_path: Path) -> None:
    home.mkdir()
    (home / "duckgraph.toml").write_text('namespace = "from-home"\n', encoding="utf-8")
    assert load_settings(env={"DUCKGRAPH_CONFIG": "$HOME/duckgraph.toml"}).namespace == "from-home"
    with pytest.raises(ConfigError, match="DUCKGRAPH_CONFIG = 'duckgraph.toml': a relative path from "
                                          "DUCKGRAPH_CONFIG would be taken"):
        load_settings(env={"DUCKGRAPH_CONFIG": "duckgraph.toml"})
    with pytest.raises(ConfigError, match=r"DUCKGRAPH_CONFIG = '\$NOTES_FOLDER/c.toml': \$NOTES_FOLDER is not set"):
        load_settings(env={"DUCKGRAPH_CONFIG": "$NOTES_FOLDER/c.toml"})
    (tmp_path / "client" / "here.toml").write_text('namespace = "here"\n', encoding="utf-8")
    assert load_settings("here.toml", env={}).namespace == "here"  # --config: the current folder


# -- empty values --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [name for name in SETTING_VARIABLES if name != "DUCKGRAPH_CONFIG"])
@pytest.mark.parametrize("value", ["", "  "])
def test_a_setting_variable_set_but_empty_is_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={name: value})
    assert str(info.value) == f"{name} is set but empty: give it a value, or remove it to use the default"


def test_an_empty_config_variable_counts_as_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "default.toml"
    default.write_text('namespace = "the-default-file"\n', encoding="utf-8")
    monkeypatch.setattr(config, "default_config_file", lambda: default)
    assert load_settings(env={"DUCKGRAPH_CONFIG": ""}).namespace == "the-default-file"
    with pytest.raises(ConfigError, match="the config file's name is empty"):
        load_settings("", env={})


# -- names that are no setting -------------------------------------------------------------------------------


def test_a_mistyped_variable_is_named_with_the_setting_it_resembles() -> None:
    env = {"DUCKGRAPH_TOOL": "memory", "DUCKGRAPH_NAMSPACE": "work", "DUCKGRAPH_db": "/x.duckdb",
           "DUCKGRAPH_EMBEDER_OPTIONS": "{}", "DUCKGRAPH_QWERTY": "1", "OTHER_TOOL": "x"}
    assert unknown_variables(env) == [
        ("DUCKGRAPH_EMBEDER_OPTIONS is not a duckgraph setting and is ignored: did you mean "
         "DUCKGRAPH_EMBEDDER_OPTIONS?"),
        "DUCKGRAPH_NAMSPACE is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_NAMESPACE?",
        ("DUCKGRAPH_QWERTY is not a duckgraph setting and is ignored: the variables are listed in "
         "docs/configuration.md"),
        "DUCKGRAPH_TOOL is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_TOOLS?",
        "DUCKGRAPH_db is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_DB?",
    ]


def test_every_variable_duckgraph_reads_is_known() -> None:
    """The settings' variables, the config file's, and those of contrib/bench and the tests: none is warned of."""
    env = {name: "1" for name in KNOWN_VARIABLES}
    assert unknown_variables(env) == []
    assert {"DUCKGRAPH_CONFIG", "DUCKGRAPH_BENCH_CACHE", "DUCKGRAPH_UI_SCREENSHOTS", "DUCKGRAPH_DB",
            "DUCKGRAPH_FETCH_DELAY", "DUCKGRAPH_COMMUNITY_DETECTOR_OPTIONS"} <= KNOWN_VARIABLES


def test_loading_the_settings_warns_of_a_mistyped_variable_once(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(config, "_warned", set())
    env = {"DUCKGRAPH_TOOL": "memory"}
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.config"):
        settings = load_settings(env=env)
        load_settings(env=env)  # a command may load its settings twice
    assert settings.tools == "graphrag"  # ignored, as the warning says
    assert [r.getMessage() for r in caplog.records] == [
        "DUCKGRAPH_TOOL is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_TOOLS?"]


def test_log_level_error_silences_the_warning(monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(config, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.config"):
        load_settings(env={"DUCKGRAPH_TOOL": "memory", "DUCKGRAPH_LOG_LEVEL": "ERROR"})
    assert caplog.records == []
