"""The installed distribution holds exactly the duckgraph package: no bare core/ports/plugins modules."""

import json
from importlib import metadata
from pathlib import Path

import pytest

import duckgraph.core


def _installed_distribution() -> metadata.Distribution | None:
    # The folder holding the imported duckgraph package; a build leaves a duckgraph.egg-info in the checkout,
    # which must not be mistaken for the installed distribution.
    site = Path(duckgraph.core.__file__).resolve().parents[2]
    found = list(metadata.distributions(name="duckgraph", path=[str(site)]))
    return found[0] if found else None


def _is_editable(dist: metadata.Distribution) -> bool:
    direct_url = dist.read_text("direct_url.json")
    return bool(direct_url) and json.loads(direct_url).get("dir_info", {}).get("editable", False)


def test_installed_files_live_under_duckgraph():
    dist = _installed_distribution()
    if dist is None or _is_editable(dist):
        pytest.skip("an editable install has no file list; CI installs the built wheel")
    # Entries starting with ".." are the console script, installed beside the interpreter.
    top_levels = {file.parts[0] for file in dist.files or [] if file.parts[0] != ".."}
    unexpected = {name for name in top_levels if name != "duckgraph" and not name.endswith((".dist-info", ".data"))}
    assert "duckgraph" in top_levels
    assert not unexpected, f"the wheel installs top-level names besides duckgraph: {sorted(unexpected)}"
    files = {str(file) for file in dist.files or []}
    for required in ("duckgraph/core/data/demo.json", "duckgraph/ports/hookspecs.py",
                     "duckgraph/plugins/duckdb/store.py", "duckgraph/core/mcp/server.py",
                     "duckgraph/core/ui/static/index.html", "duckgraph/core/ui/static/main.js"):
        assert required in files


def test_console_script_points_at_the_cli():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts") if ep.dist.name == "duckgraph"}
    assert scripts == {"duckgraph": "duckgraph.core.cli:main"}
