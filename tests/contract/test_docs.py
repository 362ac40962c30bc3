"""The documentation keeps up with the code (as datasette's tests do): every tool, prompt, resource, command,
DUCKGRAPH_* variable and plugin hook appears in README.md or docs/*.md; the README names no command-line flag the
CLI does not accept, stays a short guide, runs the tests as CI does, and links only to pages that exist."""

from __future__ import annotations

import argparse
import json
import re
import typing
from importlib import resources
from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core import cli
from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import PluginChoice, Settings, load_settings
from duckgraph.core.mcp.server import build_server
from duckgraph.ports import hookspecs
from tests.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = "\n".join(path.read_text(encoding="utf-8") for path in [README, *DOC_PAGES])
README_TEXT = README.read_text(encoding="utf-8")
MAX_README_LINES = 250


def documented_in_code(name: str) -> bool:
    """`name` appears in an inline code span or a code line of the docs (prose mentions do not count)."""
    return re.search(rf"`{re.escape(name)}(?![\w-])", DOCS) is not None or re.search(
        rf"(?<![\w/.-]){re.escape(name)}(?![\w-])", _code_blocks(DOCS)) is not None


def _code_blocks(text: str) -> str:
    return "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE))


# -- what the code offers ---------------------------------------------------------------------------------------

def tool_names() -> list[str]:
    listing = json.loads((resources.files("duckgraph.core") / "data" / "tool_listing.json").read_text("utf-8"))
    return sorted({tool["name"] for tools in listing["tool_sets"].values() for tool in tools})


def prompts_and_resources(tmp_path: Path) -> list[str]:
    """The names of the prompts and the URIs of the resources of a server with every tool set, built in memory."""
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools="all")
    server = build_server(bootstrap(settings, embedder=HashingEmbedder()))

    async def listed() -> list[str]:
        async with Client(server) as client:
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            uris = [str(r.uri) for r in (await client.list_resources()).resources]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        return prompts + uris + templates

    return anyio.run(listed)


def cli_commands() -> dict[str, argparse.ArgumentParser]:
    [subparsers] = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def cli_flags(command: str) -> set[str]:
    return {flag for action in cli_commands()[command]._actions for flag in action.option_strings}


def environment_variables() -> list[str]:
    """Every DUCKGRAPH_* name in the source, and those config.py derives from the settings' fields."""
    found = set()
    for folder in ("core", "plugins", "ports"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(re.findall(r"DUCKGRAPH_[A-Z][A-Z0-9_]*", path.read_text(encoding="utf-8")))
    for name, field in Settings.model_fields.items():
        found.add(f"DUCKGRAPH_{name.upper()}")
        if field.annotation is PluginChoice or PluginChoice in typing.get_args(field.annotation):
            found.add(f"DUCKGRAPH_{name.upper()}_OPTIONS")
    return sorted(found)


def hook_names() -> list[str]:
    return sorted(name for name, value in vars(hookspecs).items() if hasattr(value, "duckgraph_spec"))


# -- everything is documented ---------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", tool_names())
def test_every_tool_is_documented(tool: str) -> None:
    assert documented_in_code(tool), f"the MCP tool {tool} is in no table or code span of README.md or docs/"


def test_every_prompt_and_resource_is_documented(tmp_path: Path) -> None:
    names = prompts_and_resources(tmp_path)
    assert names, "the server offers no prompt or resource: has build_server moved?"
    missing = [name for name in names if not documented_in_code(name)]
    assert missing == [], f"prompts or resources missing from README.md and docs/: {missing}"


@pytest.mark.parametrize("command", sorted(cli_commands()))
def test_every_command_is_documented(command: str) -> None:
    assert re.search(rf"duckgraph {command}\b", DOCS), f"`duckgraph {command}` is missing from README.md and docs/"


@pytest.mark.parametrize("variable", environment_variables())
def test_every_variable_is_documented(variable: str) -> None:
    assert re.search(rf"\b{variable}\b", DOCS), f"{variable} is missing from README.md and docs/"


def test_the_variables_are_found() -> None:
    # Guards the scan above: were it to find nothing, every variable would pass unchecked.
    assert {"DUCKGRAPH_DB", "DUCKGRAPH_TOOLS", "DUCKGRAPH_CONFIG", "DUCKGRAPH_EMBEDDER_OPTIONS"} <= set(
        environment_variables())


@pytest.mark.parametrize("hook", hook_names())
def test_every_hook_is_documented(hook: str) -> None:
    assert documented_in_code(hook), f"the plugin hook {hook} is missing from README.md and docs/"


def test_the_hooks_are_found() -> None:
    assert {"register_embedders", "register_stores", "register_extractors"} <= set(hook_names())


# -- the README's command lines ---------------------------------------------------------------------------------

def command_lines(text: str) -> list[tuple[str, str]]:
    """(command, its arguments) for each duckgraph command line the text names: `duckgraph <command> ...` in code
    spans and code blocks, a code span starting with a bare command (`serve --http`), and a client
    configuration's "args": ["serve", "--db", ...]."""
    commands = cli_commands()
    segments = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE))
    segments += _code_blocks(text).splitlines()
    found = []
    for segment in segments:
        for match in re.finditer(r"\bduckgraph\s+([a-z][\w-]*)(.*)", segment):
            found.append((match[1], re.split(r"&&|\|\||;|\s#|\|", match[2])[0]))
        bare = re.match(r"\s*([a-z][\w-]*)\s+(-.*)", segment)
        if bare and bare[1] in commands:
            found.append((bare[1], bare[2]))
    for args in re.findall(r'"args"\s*:\s*\[([^\]]*)\]', text):
        command, *rest = json.loads(f"[{args}]")
        found.append((command, " ".join(rest)))
    return found


def flags_of(arguments: str) -> list[str]:
    """The options named in `arguments`; none after a lone "--", past which all is text (`search -- -Xmx4g`)."""
    return re.findall(r"(?<![\w/.$~-])(--?[A-Za-z][\w-]*)", re.split(r"(?:^|\s)--(?:\s|$)", arguments)[0])


def test_the_readme_names_only_commands_and_flags_the_cli_accepts() -> None:
    commands = cli_commands()
    lines = command_lines(README_TEXT)
    assert len(lines) >= len(commands), "the README names fewer command lines than there are commands"
    wrong = []
    for command, arguments in lines:
        if command not in commands:
            wrong.append(f"duckgraph {command}: no such command")
            continue
        wrong += [f"duckgraph {command} {flag}" for flag in flags_of(arguments) if flag not in cli_flags(command)]
    assert wrong == [], f"the README names what the CLI does not accept: {wrong}"


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda path: path.name)
def test_the_docs_name_only_flags_the_cli_accepts(page: Path) -> None:
    commands = cli_commands()
    wrong = [f"duckgraph {command} {flag}" for command, arguments in command_lines(page.read_text(encoding="utf-8"))
             if command in commands for flag in flags_of(arguments) if flag not in cli_flags(command)]
    assert wrong == [], f"{page.name} names flags the CLI does not accept: {wrong}"


def test_a_wrong_flag_would_be_caught() -> None:
    # The example issue 26 found: `serve --tools memory` does not exist (DUCKGRAPH_TOOLS=memory does).
    [(command, arguments)] = command_lines("run `serve --tools memory`")
    assert command == "serve" and "--tools" in flags_of(arguments) and "--tools" not in cli_flags("serve")


# -- the README as a whole ------------------------------------------------------------------------------------

def test_the_readme_is_a_short_guide() -> None:
    lines = len(README_TEXT.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move details to docs/ (at most {MAX_README_LINES})"


def test_the_readme_runs_the_tests_as_ci_does() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in script if line.strip() and not line.startswith(("#", "set ", "cd "))]
    readme = README_TEXT.splitlines()
    assert commands and all(command in readme for command in commands), (
        "the README's test commands are not the ones .ci/run runs")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    headings = re.findall(r"^#+\s+(.+)$", re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"),
                                                 flags=re.DOTALL | re.MULTILINE), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", [README, *DOC_PAGES], ids=lambda path: path.name)
def test_links_point_to_existing_files(page: Path) -> None:
    links = re.findall(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)", page.read_text(encoding="utf-8"))
    broken = []
    for target, anchor in links:
        if "://" in target or target.startswith("mailto:"):
            continue
        path = page.parent / target if target else page
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}#{anchor}")
    assert broken == [], f"{page.name} links to files or headings that do not exist: {broken}"


def test_the_readme_links_to_the_docs() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README_TEXT))
    assert {f"docs/{page.name}" for page in DOC_PAGES} <= linked, "a page of docs/ is not linked from the README"
