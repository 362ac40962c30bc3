"""Small command-line behaviours: every `search` flag explained, a closed stdout ends quietly, and
`serve --http` on a port in use says so before announcing anything."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.cli import _parser, main

DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]


def new_file(path: Path) -> None:
    """An empty memory at `path`, as the first write makes it."""
    from duckgraph.plugins.duckdb import DuckDBStore

    store = DuckDBStore(path)
    store.open()
    store.close()


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """A child's environment: no user config, no DUCKGRAPH_* variables."""
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("DUCKGRAPH_")}
    env["DUCKGRAPH_CONFIG"] = str(config)
    return env


def test_every_search_flag_has_help() -> None:
    subcommands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    search = subcommands.choices["search"]
    undocumented = [a.dest for a in search._actions if not a.help and a.dest != "help"]
    assert undocumented == []
    text = search.format_help()
    for flag in ("--hops", "--k-anchors", "--max-nodes", "--max-passages", "--token-budget", "--as-of",
                 "--include-history", "--after", "--before"):
        assert flag in text


def test_stats_into_a_closed_pipe_ends_quietly(tmp_path: Path, environment: dict[str, str]) -> None:
    """`duckgraph stats --json | head`: the reader is gone before the output is written."""
    new_file(tmp_path / "kb.duckdb")  # stats refuses a file that is not there
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*DUCKGRAPH, "stats", "--json", "--db", str(tmp_path / "kb.duckdb")], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=environment)
    finally:
        os.close(write_end)
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert done.returncode == 141  # as a command ended by SIGPIPE


def test_serve_http_on_a_port_in_use_names_it_and_announces_nothing(tmp_path: Path,
                                                                      environment: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*DUCKGRAPH, "serve", "--http", "--port", str(port), "--db", str(tmp_path / "kb.duckdb")],
                              capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 1
    assert "serving MCP" not in done.stderr
    assert done.stderr.strip() == (
        f"duckgraph: cannot serve MCP on 127.0.0.1 port {port}: the port is in use (another `duckgraph serve "
        "--http`, or another program). Stop that program, or choose another port with --port")
    assert done.stdout == ""
    assert not (tmp_path / "kb.duckdb").exists()


# -- settings refused with a message, never a traceback ----------------------------------------------------------


@pytest.fixture
def no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`main` in this process with no user config and no DUCKGRAPH_* variables; the config file it reads."""
    for name in [n for n in os.environ if n.startswith("DUCKGRAPH_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.chdir(tmp_path)
    return config


@pytest.mark.parametrize("how", ["flag", "file", "env"])
def test_an_unknown_log_level_is_a_message_and_exit_1(no_settings: Path, monkeypatch: pytest.MonkeyPatch, capsys,
                                                      how: str) -> None:
    flags = ["--log-level", "LOUD"] if how == "flag" else []
    if how == "file":
        no_settings.write_text('log_level = "LOUD"\n', encoding="utf-8")
    if how == "env":
        monkeypatch.setenv("DUCKGRAPH_LOG_LEVEL", "LOUD")
    assert main(["stats", "--db", "kb.duckdb", *flags]) == 1
    assert "log_level = 'LOUD': must be DEBUG, INFO, WARNING or ERROR" in capsys.readouterr().err
    assert not Path("kb.duckdb").exists()


@pytest.mark.parametrize("options, message", [
    ('{"read_only": "yes"}', "store option read_only must be true or false, not 'yes'"),
    ('{"ann_min_rows": -5}', "store option ann_min_rows must be a whole number, 1 or more, not -5"),
])
def test_a_store_option_of_the_wrong_kind_is_a_message_and_exit_1(no_settings: Path, monkeypatch, capsys,
                                                                  options: str, message: str) -> None:
    monkeypatch.setenv("DUCKGRAPH_STORE_OPTIONS", options)  # no DUCKGRAPH_STORE: for the default store, duckdb
    assert main(["stats", "--db", "kb.duckdb"]) == 1
    assert capsys.readouterr().err == f"duckgraph: {message}\n"
    assert not Path("kb.duckdb").exists()


def test_store_options_alone_go_to_the_default_store(no_settings: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DUCKGRAPH_STORE_OPTIONS", '{"memory_limit": "512MB"}')
    new_file(Path("kb.duckdb"))
    assert main(["stats", "--db", "kb.duckdb", "--json"]) == 0
    assert '"nodes": 0' in capsys.readouterr().out


@pytest.mark.parametrize("argv, text", [
    (["--db", ""], "db = '': must be the path of the knowledge file"),
    (["--config", "list.toml"], "db = [1, 2]: must be the path of the knowledge file"),
])
def test_a_db_that_is_no_file_name_is_a_message_and_creates_nothing(no_settings: Path, capsys, argv, text) -> None:
    Path("list.toml").write_text("db = [1, 2]\n", encoding="utf-8")
    assert main(["stats", *argv]) == 1
    assert text in capsys.readouterr().err
    assert sorted(p.name for p in Path().iterdir()) == ["config.toml", "list.toml"]


def test_a_boolean_variable_with_a_typo_is_a_message_and_exit_1(no_settings: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DUCKGRAPH_FETCH_URLS", "flase")
    assert main(["stats", "--db", "kb.duckdb"]) == 1
    assert "DUCKGRAPH_FETCH_URLS = 'flase': must be true or false" in capsys.readouterr().err


# -- search flags: the MCP tool's limits ---------------------------------------------------------------------------


@pytest.mark.parametrize("flag, value, allowed", [
    ("--max-nodes", "-1", "from 1 to 200"), ("--k-anchors", "-2", "from 1 to 50"),
    ("--max-passages", "-1", "from 0 to 50"), ("--hops", "-1", "from 0 to 3"), ("--hops", "99", "from 0 to 3"), ("--token-budget", "0", "from 100 to 50000"),
    ("--token-budget", "-5", "from 100 to 50000"),
])
def test_a_search_number_beyond_the_search_tools_limits_is_a_usage_error(no_settings: Path, capsys, flag: str,
                                                                         value: str, allowed: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["search", "Who founded Apple", "--db", "kb.duckdb", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: duckgraph search")
    assert err.endswith(f"duckgraph search: error: {flag} must be {allowed}, not {value}\n")
    assert not Path("kb.duckdb").exists()


def test_search_numbers_within_the_limits_are_passed_on_and_those_not_given_left_to_the_defaults() -> None:
    from duckgraph.core.cli import _search_numbers

    args = _parser().parse_args(["search", "q", "--hops", "3", "--max-passages", "0", "--token-budget", "100"])
    assert _search_numbers(args) == {"hops": 3, "max_passages": 0, "token_budget": 100}
    assert _search_numbers(_parser().parse_args(["search", "q"])) == {}


# -- text that starts with "-" -------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, error", [
    (["search", "--no-verify", "--db", "kb.duckdb"],
     "search: error: the following arguments are required: query; '--no-verify' starts with '-' and was read as an "
     "option: to give it as the query, put -- before it, after the options (duckgraph search --db kb.duckdb -- "
     "--no-verify)"),
    (["search", "how", "-Xmx4g"],
     "search: error: unrecognized arguments: -Xmx4g; '-Xmx4g' starts with '-' and was read as an option: to give it "
     "as the query, put -- before it, after the options (duckgraph search how -- -Xmx4g)"),
    (["communities", "search", "-Xmx4g", "--db", "kb.duckdb"],
     "communities: error: unrecognized arguments: -Xmx4g; '-Xmx4g' starts with '-' and was read as an option: to give "
     "it as the query, put -- before it, after the options (duckgraph communities search --db kb.duckdb -- -Xmx4g)"),
    (["documents", "delete", "-draft", "--json"],
     "documents: error: the following arguments are required: ID; '-draft' starts with '-' and was read as an "
     "option: to give it as a document id, put -- before it, after the options (duckgraph documents delete --json "
     "-- -draft)"),
])
def test_a_text_argument_taken_for_an_option_is_refused_saying_to_put_two_dashes_before_it(
        no_settings: Path, capsys, argv: list[str], error: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"duckgraph {error}\n")
    assert not Path("kb.duckdb").exists()


def test_the_command_the_error_suggests_reads_the_text_and_the_options() -> None:
    args = _parser().parse_args(["search", "--db", "kb.duckdb", "--", "-Xmx4g"])
    assert (args.query, args.db) == ("-Xmx4g", "kb.duckdb")
    # An option between the action and "--" is still an option, and the text after "--" the query.
    args = _parser().parse_args(["communities", "search", "--db", "kb.duckdb", "--json", "--", "-Xmx4g"])
    assert (args.action, args.query, args.db, args.json) == ("search", "-Xmx4g", "kb.duckdb", True)
    args = _parser().parse_args(["documents", "delete", "--json", "--", "-draft", "--db"])
    assert (args.ids, args.json, args.db) == (["-draft", "--db"], True, None)


def test_an_unknown_option_of_a_command_without_text_gets_no_such_advice(no_settings: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["stats", "--no-verify"])
    assert capsys.readouterr().err.endswith("duckgraph stats: error: unrecognized arguments: --no-verify\n")
