"""What load_settings does with a config file's bytes (not UTF-8; a UTF-8 byte-order mark), with nan and infinity
in any float setting or plugin option, and with namespace_fallback set where it has no effect."""

from __future__ import annotations

import codecs
import logging
import re
import typing
from pathlib import Path

import pytest

from duckgraph.core import config
from duckgraph.core.config import Settings, load_settings, unused_settings
from duckgraph.ports import ConfigError


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config file in the developer's own config folder must not leak into these tests."""
    monkeypatch.setattr(config, "default_config_file", lambda: tmp_path / "no-such-dir" / "config.toml")
    monkeypatch.setattr(config, "_warned", set())


# -- the file's bytes ------------------------------------------------------------------------------------------


def test_a_latin_1_config_file_is_refused_with_the_byte_and_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes('namespace = "work"\ndb = "/tmp/x/café.duckdb"\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    assert str(info.value) == (f"cannot read config file {path}: it is not UTF-8 (byte 0xe9 at offset 35, line 2); "
                               "save it as UTF-8")


def test_the_default_config_file_is_refused_so_even_when_the_db_comes_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "config" / "config.toml"
    default.parent.mkdir()
    default.write_bytes('db = "/tmp/x/café.duckdb"\n'.encode("latin-1"))
    monkeypatch.setattr(config, "default_config_file", lambda: default)
    with pytest.raises(ConfigError, match=f"^cannot read config file {default}: it is not UTF-8 \\(byte 0xe9 at "
                                          "offset 16, line 1\\); save it as UTF-8$"):
        load_settings(env={"DUCKGRAPH_DB": str(tmp_path / "kb.duckdb")})


def test_a_utf_16_config_file_is_refused_as_not_utf_8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes('namespace = "work"\n'.encode("utf-16"))  # Notepad's "Unicode"
    with pytest.raises(ConfigError, match="it is not UTF-8 \\(byte 0xff at offset 0, line 1\\); save it as UTF-8"):
        load_settings(path, env={})


def test_a_config_file_with_a_utf_8_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(codecs.BOM_UTF8 + 'namespace = "café-notes"\ndb = "/data/mémoire.duckdb"\n'.encode())
    with pytest.raises(ConfigError, match="invalid namespace 'café-notes'"):  # the text after the mark is read
        load_settings(path, env={})
    path.write_bytes(codecs.BOM_UTF8 + 'namespace = "notes"\ndb = "/data/mémoire.duckdb"\n'.encode())
    settings = load_settings(path, env={})
    assert (settings.namespace, settings.db) == ("notes", Path("/data/mémoire.duckdb"))


def test_a_byte_order_mark_before_a_latin_1_byte_counts_in_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(codecs.BOM_UTF8 + 'db = "/x/caf\xe9.duckdb"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="byte 0xe9 at offset 15, line 1"):
        load_settings(path, env={})


# -- nan and infinity ----------------------------------------------------------------------------------------


def _float_settings() -> list[str]:
    """Every setting whose value is a float (float, or float | None)."""
    return sorted(name for name, field in Settings.model_fields.items()
                  if field.annotation is float or float in typing.get_args(field.annotation))


def test_the_float_settings_are_the_ones_these_tests_know() -> None:
    # A new float setting is checked by the parametrized tests below as soon as it is declared; this says which.
    assert _float_settings() == ["fetch_delay", "relevance_floor"]


@pytest.mark.parametrize("name", _float_settings())
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_every_float_setting_refuses_nan_and_infinity_from_its_variable_as_not_a_number(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={f"DUCKGRAPH_{name.upper()}": value})
    assert str(info.value) == (f"invalid settings (from DUCKGRAPH_* variables or flags): {name} = {value!r}: must be "
                               "a number, not nan or infinity")


@pytest.mark.parametrize("name", _float_settings())
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_every_float_setting_refuses_nan_and_infinity_from_the_file(tmp_path: Path, name: str, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"{name} = {value}\n", encoding="utf-8")  # TOML's own nan and inf are floats
    with pytest.raises(ConfigError, match=f"{name} = (nan|inf|-inf): must be a number, not nan or infinity$"):
        load_settings(path, env={})


def test_a_number_out_of_range_still_says_its_range() -> None:
    with pytest.raises(ConfigError, match="relevance_floor = '1.5': Input should be less than or equal to 1$"):
        load_settings(env={"DUCKGRAPH_RELEVANCE_FLOOR": "1.5"})
    assert load_settings(env={"DUCKGRAPH_FETCH_DELAY": "2.5"}).fetch_delay == 2.5


@pytest.mark.parametrize("options, name", [('{"passage_texts_mb": NaN}', "passage_texts_mb"),
                                           ('{"ann_min_rows": 5, "nested": {"deep": [1, -Infinity]}}',
                                            "nested.deep[1]")])
def test_a_plugin_option_of_nan_or_infinity_from_json_is_refused(options: str, name: str) -> None:
    # json.loads takes NaN and Infinity, which no JSON writer emits: a store option of NaN crashed at open.
    with pytest.raises(ConfigError, match=re.escape(f"store.options: option {name} must be a number, not nan or "
                                                    "infinity")):
        load_settings(env={"DUCKGRAPH_STORE_OPTIONS": options})


@pytest.mark.parametrize("section", ["store", "embedder", "community_detector"])
def test_a_plugin_option_of_nan_or_inf_in_the_file_is_refused(tmp_path: Path, section: str) -> None:
    path = tmp_path / "config.toml"
    use = {"store": "duckdb", "embedder": "sentence-transformers", "community_detector": "leiden"}[section]
    path.write_text(f'[{section}]\nuse = "{use}"\noptions = {{ x = 1.5, y = inf }}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{section}.options: option y must be a number, not nan or infinity$"):
        load_settings(path, env={})
    path.write_text(f'[{section}]\nuse = "{use}"\noptions = {{ x = 1.5, y = 2.0 }}\n', encoding="utf-8")
    assert getattr(load_settings(path, env={}), section).options == {"x": 1.5, "y": 2.0}


# -- namespace_fallback without @roots ------------------------------------------------------------------------


FALLBACK_IGNORED = ("namespace_fallback = 'shared' (DUCKGRAPH_NAMESPACE_FALLBACK or the config file) has no effect: "
                    "it is the namespace of an MCP client without roots when namespace is @roots, and namespace is "
                    "'{namespace}'; set namespace (DUCKGRAPH_NAMESPACE) to @roots, or remove namespace_fallback (see "
                    "docs/namespaces.md)")


@pytest.mark.parametrize("env", [{"DUCKGRAPH_NAMESPACE_FALLBACK": "shared"},
                                 {"DUCKGRAPH_NAMESPACE_FALLBACK": "shared", "DUCKGRAPH_NAMESPACE": "work"}])
def test_namespace_fallback_without_roots_is_warned_of(env: dict[str, str], caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.config"):
        settings = load_settings(env=env)
    expected = FALLBACK_IGNORED.format(namespace=env.get("DUCKGRAPH_NAMESPACE", "default"))
    assert unused_settings(settings) == [expected]
    assert [r.getMessage() for r in caplog.records] == [expected]


def test_namespace_fallback_from_the_file_without_roots_is_warned_of(tmp_path: Path, caplog) -> None:
    path = tmp_path / "config.toml"
    path.write_text('namespace_fallback = "shared"\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.config"):
        load_settings(path, env={})
    assert [r.getMessage() for r in caplog.records] == [FALLBACK_IGNORED.format(namespace="default")]


@pytest.mark.parametrize("env, overrides", [
    ({"DUCKGRAPH_NAMESPACE_FALLBACK": "shared", "DUCKGRAPH_NAMESPACE": "@roots"}, {}),
    # --namespace chooses this command's namespace; the fallback in the environment is the server's.
    ({"DUCKGRAPH_NAMESPACE_FALLBACK": "shared", "DUCKGRAPH_NAMESPACE": "@roots"}, {"namespace": "work"}),
    ({"DUCKGRAPH_NAMESPACE_FALLBACK": "shared"}, {"namespace": "work"}),
    ({"DUCKGRAPH_NAMESPACE": "work"}, {}),
    ({"DUCKGRAPH_NAMESPACE_FALLBACK": "shared", "DUCKGRAPH_LOG_LEVEL": "ERROR"}, {}),
])
def test_namespace_fallback_is_not_warned_of_where_it_works_or_was_not_set(env, overrides, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.config"):
        load_settings(env=env, **overrides)
    assert caplog.records == []
