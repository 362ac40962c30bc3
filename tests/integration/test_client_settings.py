"""Settings as an MCP client's config gives them, through the CLI's `main` on real DuckDB files and the real
default model: "$HOME/notes/memory.duckdb" passed unexpanded, a relative path resolved against whatever folder
the client starts duckgraph in, an empty value, a mistyped variable name, and a password in an Ollama base_url
(tests/ollama_server.py stands in for Ollama)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import platformdirs
import pytest

from duckgraph.core import config
from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.integration.test_doctor import closed_port_url, env, use_ollama  # noqa: F401 (env is a fixture)
from tests.ollama_server import FakeOllama

ONE_ENTITY = '{"type":"entity","name":"Maya","entityType":"person","observations":["likes tea"]}\n'


@pytest.fixture
def client(env, tmp_path: Path) -> tuple[Path, Path]:
    """A home of its own and the folder the client starts duckgraph in (its current folder), both empty; the
    model's ONNX export stays in the real cache folder (a fresh one would export it again)."""
    env.setenv("XDG_CACHE_HOME", platformdirs.user_cache_dir())
    home, folder = tmp_path / "home", tmp_path / "client"
    home.mkdir()
    folder.mkdir()
    env.setenv("HOME", str(home))
    env.chdir(folder)
    env.setattr(config, "_warned", set())
    return home, folder


def stats(capsys) -> dict:
    capsys.readouterr()
    assert main(["stats", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def real_memory_file(path: Path, minilm) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with KnowledgeBase(DuckDBStore(path), minilm) as kb:
        kb.add_knowledge_graph([NodeInput(name="Maya", type="person", observations=["likes tea"])], [])
    return path


# -- 1. paths -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["$HOME/notes/memory.duckdb", "${HOME}/notes/memory.duckdb"])
def test_a_home_variable_the_client_did_not_expand_puts_the_memory_in_the_home_folder(
        env, client, tmp_path: Path, capsys, value: str):
    home, folder = client
    entity = tmp_path / "one.jsonl"
    entity.write_text(ONE_ENTITY, encoding="utf-8")
    env.setenv("DUCKGRAPH_DB", value)
    assert main(["import", str(entity)]) == 0
    assert (home / "notes" / "memory.duckdb").is_file()
    assert list(folder.iterdir()) == []  # no folder named "$HOME" where the client runs
    assert stats(capsys)["nodes"] == 1


@pytest.mark.parametrize("where", ["DUCKGRAPH_DB", "config file"])
def test_a_relative_db_from_a_client_is_refused_and_nothing_is_created(env, client, tmp_path: Path, capsys,
                                                                       where: str):
    home, folder = client
    entity = tmp_path / "one.jsonl"
    entity.write_text(ONE_ENTITY, encoding="utf-8")
    if where == "DUCKGRAPH_DB":
        env.setenv("DUCKGRAPH_DB", "memory.duckdb")
    else:
        file = tmp_path / "duckgraph.toml"
        file.write_text('db = "memory.duckdb"\n', encoding="utf-8")
        env.setenv("DUCKGRAPH_CONFIG", str(file))
        where = f"the config file {file}"
    capsys.readouterr()
    assert main(["import", str(entity)]) == 1
    err = capsys.readouterr().err
    assert (f"db = 'memory.duckdb': a relative path from {where} would be taken from the folder duckgraph is "
            "started in, which each MCP client chooses") in err
    assert list(folder.iterdir()) == []
    assert list(home.rglob("*.duckdb")) == []


def test_a_relative_db_flag_is_the_current_folder_and_doctor_shows_it_whole(env, client, minilm, capsys):
    _, folder = client
    real_memory_file(folder / "memory.duckdb", minilm)
    capsys.readouterr()
    assert main(["doctor", "--json", "--db", "memory.duckdb"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["db"] == str(folder / "memory.duckdb")
    assert report["database"]["exists"] is True


def test_a_variable_that_is_not_set_is_refused_and_nothing_is_created(env, client, tmp_path: Path, capsys):
    home, folder = client
    env.delenv("NOTES_FOLDER", raising=False)
    env.setenv("DUCKGRAPH_DB", "$NOTES_FOLDER/memory.duckdb")
    entity = tmp_path / "one.jsonl"
    entity.write_text(ONE_ENTITY, encoding="utf-8")
    capsys.readouterr()
    assert main(["import", str(entity)]) == 1
    assert ("db = '$NOTES_FOLDER/memory.duckdb': $NOTES_FOLDER is not set, so the path cannot be expanded"
            in capsys.readouterr().err)
    assert list(folder.iterdir()) == []
    assert list(home.rglob("*.duckdb")) == []


# -- 2. empty values and mistyped names -----------------------------------------------------------------------


def test_an_empty_db_variable_is_refused_rather_than_meaning_the_default_file(env, client, tmp_path: Path, capsys):
    home, _ = client
    env.setenv("DUCKGRAPH_DB", "")
    entity = tmp_path / "one.jsonl"
    entity.write_text(ONE_ENTITY, encoding="utf-8")
    capsys.readouterr()
    assert main(["import", str(entity)]) == 1
    assert capsys.readouterr().err == ("duckgraph: DUCKGRAPH_DB is set but empty: give it a value, or remove it to "
                                       "use the default\n")
    assert list(home.rglob("*.duckdb")) == []  # the default file was not used
    assert main(["doctor"]) == 1


def test_doctor_warns_of_mistyped_variables_with_what_was_meant(env, client, minilm, capsys, caplog):
    home, _ = client
    db = real_memory_file(home / "memory.duckdb", minilm)
    env.setenv("DUCKGRAPH_TOOL", "memory")
    env.setenv("DUCKGRAPH_NAMSPACE", "work")
    capsys.readouterr()
    assert main(["doctor", "--json", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    meant = ["DUCKGRAPH_NAMSPACE is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_NAMESPACE?",
             "DUCKGRAPH_TOOL is not a duckgraph setting and is ignored: did you mean DUCKGRAPH_TOOLS?"]
    assert [w for w in report["warnings"] if "DUCKGRAPH_" in w] == meant
    assert {"check": "environment", "ok": False, "detail": "2 DUCKGRAPH_* variable(s) ignored, below"} in (
        report["checks"])
    assert [m for m in caplog.messages if "DUCKGRAPH_" in m] == meant  # logged too: `serve` tells its client
    assert main(["doctor", "--db", str(db)]) == 0
    printed = capsys.readouterr().out
    assert "no problems found" not in printed
    assert f"warning:   {meant[1]}" in printed


def test_doctor_lists_no_environment_check_when_every_variable_is_a_setting(env, client, minilm, capsys):
    home, _ = client
    db = real_memory_file(home / "memory.duckdb", minilm)
    env.setenv("DUCKGRAPH_TOOLS", "memory")
    capsys.readouterr()
    assert main(["doctor", "--json", "--db", str(db)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "environment" not in [check["check"] for check in report["checks"]]


# -- 3. a password in a URL -----------------------------------------------------------------------------------


def with_password(url: str) -> str:
    return url.replace("http://", "http://me:p4ssw0rd@")


def test_doctor_never_shows_the_password_of_ollama_s_url(env, tmp_path: Path, capsys, caplog):
    down = closed_port_url()
    use_ollama(env, with_password(down), extractor="qwen3:8b")
    for argv in (["doctor", "--json"], ["doctor"]):
        assert main([*argv, "--db", str(tmp_path / "kb.duckdb")]) == 1
        captured = capsys.readouterr()
        assert "p4ssw0rd" not in captured.out + captured.err
        assert f"cannot reach Ollama at {down.replace('http://', 'http://***@')}: is it running?" in captured.out
    # Reachable, with the password sent, and an answer that quotes the URL (a model not pulled).
    with FakeOllama(models=("all-minilm",)) as ollama:
        use_ollama(env, with_password(ollama.base_url), extractor="qwen3:8b")
        with caplog.at_level(logging.INFO):  # what --log-level INFO does outside pytest
            assert main(["doctor", "--json", "--db", str(tmp_path / "kb.duckdb")]) == 1
        captured = capsys.readouterr()
        assert ollama.requests_to("/api/embed")  # the URL with its password still reaches the server
        shown = ollama.base_url.replace("http://", "http://***@")
    report = json.loads(captured.out)
    assert "p4ssw0rd" not in captured.out + captured.err
    assert report["settings"]["embedder"]["options"]["base_url"] == shown
    assert any(f"Ollama at {shown} does not have the model 'qwen3:8b'" in problem for problem in report["problems"])
    # httpx logs each request's URL at INFO: without its password too.
    assert any(m.startswith(f"HTTP Request: POST {shown}/api/embed") for m in caplog.messages)
    assert not any("p4ssw0rd" in m for m in caplog.messages)


def test_an_embedding_error_never_shows_the_password(env, tmp_path: Path, capsys):
    use_ollama(env, with_password(closed_port_url()))
    entity = tmp_path / "one.jsonl"
    entity.write_text(ONE_ENTITY, encoding="utf-8")
    capsys.readouterr()
    assert main(["import", str(entity), "--db", str(tmp_path / "kb.duckdb")]) == 1
    err = capsys.readouterr().err
    assert "cannot reach Ollama at http://***@127.0.0.1:" in err
    assert "p4ssw0rd" not in err
