"""Sentences of the docs that a docs-accuracy probe found at odds with what the commands do, pinned to that
behaviour (each behaviour itself is tested where it is made: tests/e2e/test_namespaces.py refuses an import of
several namespaces into one, tests/integration/test_demo.py ranks the fruit's passage lower)."""

from __future__ import annotations

import re
from pathlib import Path

from duckgraph.core.domain.render import MORE_PASSAGES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {page.name: page.read_text(encoding="utf-8") for page in (ROOT / "docs").glob("*.md")}


def flat(text: str) -> str:
    return " ".join(text.split())


def test_import_into_one_namespace_is_said_to_refuse_a_file_of_several():
    # Both said "every line goes into NAME" (README: "all into `NAME`, if given"), which the import refuses.
    row = next(line for line in README.splitlines() if line.startswith("| `duckgraph import FILE"))
    assert "one of several is refused" in row
    assert "one that holds several is refused" in flat(DOCS["export-import.md"])
    assert "a file that holds several namespaces is refused" in flat(DOCS["namespaces.md"])


def test_the_readme_says_where_the_demo_shows_the_fruit_s_passage():
    # It said the fruit is "pruned", yet the demo's first search lists its passage under MORE_PASSAGES.
    paragraph = flat(README.partition("`duckgraph demo` loads")[2].partition("\n\n")[0])
    assert "orchards and pies are pruned from the graph" in paragraph
    assert f'its passage comes last, under "{MORE_PASSAGES.rstrip(":")}"' in paragraph


def test_no_client_configuration_in_the_docs_runs_duckgraph_by_its_bare_name():
    # GUI apps do not see the shell's PATH (contrib/clients/README.md): every snippet gives the full path.
    for name, text in {"README.md": README, **DOCS}.items():
        assert not re.search(r'"command"\s*:\s*"duckgraph"', text), f"{name} runs a bare `duckgraph`"


def test_the_commands_that_create_a_missing_file_include_restore():
    bullet = flat(DOCS["troubleshooting.md"]).partition("refuse a database file that does not exist")[2][:600]
    assert "`serve`, `ui`, `ingest`, `import` and `demo` create it, and `restore` writes it" in bullet
