"""The config file's bytes, nan in a setting and a namespace_fallback without effect, as the commands (run as
processes, the way a shell or an MCP host starts them) say them: one line on stderr, exit status 1 for what is
refused, never a traceback."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "duckgraph.core.cli"]
NOT_UTF_8 = "cannot read config file {path}: it is not UTF-8 (byte 0xe9 at offset 16, line 1); save it as UTF-8"


def run(args: list[str], tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    """The command with a home and config folder of its own, no DUCKGRAPH_* variable but those given."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("DUCKGRAPH_")}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), **variables)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)


def latin_1_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes('db = "/tmp/x/café.duckdb"\n'.encode("latin-1"))  # as a Windows editor saves it
    return path


@pytest.mark.parametrize("command", [["stats"], ["doctor"], ["serve"]])
def test_a_latin_1_config_file_is_one_line_naming_it_for_every_command(tmp_path: Path, command: list[str]):
    config = latin_1_file(tmp_path / "config.toml")
    done = run(command, tmp_path, DUCKGRAPH_CONFIG=str(config))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"duckgraph: {NOT_UTF_8.format(path=config)}\n"


def test_a_latin_1_default_config_file_is_said_though_the_db_comes_from_the_environment(tmp_path: Path):
    # The default config file is read even when DUCKGRAPH_DB is set: one stray file stopped every host.
    config = latin_1_file(tmp_path / "xdg" / "duckgraph" / "config.toml")
    done = run(["stats"], tmp_path, DUCKGRAPH_DB=str(tmp_path / "kb.duckdb"))
    assert (done.returncode, done.stderr) == (1, f"duckgraph: {NOT_UTF_8.format(path=config)}\n")
    assert not (tmp_path / "kb.duckdb").exists()


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path):
    config = tmp_path / "config.toml"
    db = tmp_path / "from-the-file.duckdb"
    config.write_bytes(codecs.BOM_UTF8 + f'db = "{db}"\n'.encode())
    done = run(["stats"], tmp_path, DUCKGRAPH_CONFIG=str(config))
    # The file's db is the one looked for: its first line was read.
    assert (done.returncode, done.stderr) == (1, f"duckgraph: no memory at {db}: check --db / DUCKGRAPH_DB (or the "
                                                 "config file's db); `duckgraph doctor` shows which file is used. "
                                                 "Nothing was created\n")


@pytest.mark.parametrize("variable, value", [("DUCKGRAPH_RELEVANCE_FLOOR", "nan"), ("DUCKGRAPH_FETCH_DELAY", "inf")])
def test_nan_or_inf_in_a_float_setting_is_said_to_be_no_number(tmp_path: Path, variable: str, value: str):
    done = run(["stats"], tmp_path, **{variable: value}, DUCKGRAPH_DB=str(tmp_path / "kb.duckdb"))
    name = variable.removeprefix("DUCKGRAPH_").lower()
    assert (done.returncode, done.stderr) == (1, "duckgraph: invalid settings (from DUCKGRAPH_* variables or flags): "
                                                 f"{name} = {value!r}: must be a number, not nan or infinity\n")


def test_nan_in_a_store_option_is_refused_not_a_traceback(tmp_path: Path):
    done = run(["stats"], tmp_path, DUCKGRAPH_DB=str(tmp_path / "kb.duckdb"),
               DUCKGRAPH_STORE_OPTIONS='{"passage_texts_mb": NaN}')
    assert (done.returncode, done.stderr) == (1, "duckgraph: invalid settings (from DUCKGRAPH_* variables or flags): "
                                                 "store.options: option passage_texts_mb must be a number, not nan "
                                                 "or infinity\n")


FALLBACK_IGNORED = ("namespace_fallback = 'shared' (DUCKGRAPH_NAMESPACE_FALLBACK or the config file) has no effect: "
                    "it is the namespace of an MCP client without roots when namespace is @roots, and namespace is "
                    "'default'; set namespace (DUCKGRAPH_NAMESPACE) to @roots, or remove namespace_fallback (see "
                    "docs/namespaces.md)")


@pytest.mark.model
def test_a_namespace_fallback_without_roots_is_warned_of_at_start_and_listed_by_doctor(tmp_path: Path):
    db = tmp_path / "kb.duckdb"
    stats = run(["stats"], tmp_path, DUCKGRAPH_DB=str(db), DUCKGRAPH_NAMESPACE_FALLBACK="shared")
    assert stats.stderr.splitlines()[0] == FALLBACK_IGNORED
    doctor = run(["doctor", "--json"], tmp_path, DUCKGRAPH_DB=str(db), DUCKGRAPH_NAMESPACE_FALLBACK="shared")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stderr.splitlines()[0] == FALLBACK_IGNORED
    assert FALLBACK_IGNORED in json.loads(doctor.stdout)["warnings"]
    # With namespace = @roots it is what a client without roots gets: nothing to warn of.
    roots = run(["doctor", "--json"], tmp_path, DUCKGRAPH_DB=str(db), DUCKGRAPH_NAMESPACE_FALLBACK="shared",
                DUCKGRAPH_NAMESPACE="@roots")
    assert "namespace_fallback" not in roots.stderr
    assert not [w for w in json.loads(roots.stdout)["warnings"] if "namespace_fallback" in w]
    assert not db.exists()
