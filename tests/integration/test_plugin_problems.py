"""Broken third-party plugins, installed for real (a module and a dist-info folder with its entry point on
sys.path): each is left out, logged with its package and the error, and listed by `duckgraph doctor` as a
problem, while the other plugins and every command keep working.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
import textwrap
from pathlib import Path

import pytest

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.cli import main
from duckgraph.core.config import load_settings
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.plugin_manager import build_plugin_manager, create, factories, plugin_problems
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from duckgraph.plugins.ollama import OllamaEmbedder
from duckgraph.ports import ConfigError, EmbedderMismatchError, hookimpl
from duckgraph.ports.communities import CommunityDetector, Membership
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama

#: A working embedder plugin, "good" (id good:v1), with one option.
GOOD = '''
import numpy as np
from duckgraph.ports import Embedder, hookimpl

class GoodEmbedder(Embedder):
    id = "good:v1"
    dimensions = 4

    def __init__(self, scale: float = 1.0):
        self.scale = scale

    def embed_batch(self, texts):
        return np.array([[len(t) + 1.0, 1.0, 0.0, self.scale] for t in texts], dtype=np.float32)

@hookimpl
def register_embedders(register):
    register("good", GoodEmbedder)
'''

BROKEN_IMPORT = '''
import this_module_does_not_exist
'''

BAD_HOOK_ARGS = '''
from duckgraph.ports import hookimpl

@hookimpl
def register_embedders(registry):
    registry("bad", object)
'''

MISSPELT_HOOK = '''
from duckgraph.ports import hookimpl

@hookimpl
def register_embedder(register):
    register("misspelt", object)
'''

UNMARKED_HOOK = '''
def register_embedders(register):
    register("unmarked", object)
'''

HOOK_RAISES = '''
from duckgraph.ports import hookimpl

@hookimpl
def register_embedders(register):
    raise RuntimeError("hook crashed")
'''

CLAIMS_OLLAMA = '''
from duckgraph.ports import hookimpl

@hookimpl
def register_embedders(register):
    register("ollama", object)
'''

CLAIMS_GOOD = '''
from duckgraph.ports import hookimpl

@hookimpl
def register_embedders(register):
    register("good", object)
'''

#: The pattern hookspecs.py's docstrings used to show: options reach the class only through **options.
LAMBDA_FACTORY = '''
from duckgraph.ports import hookimpl

class Strict:
    def __init__(self, scale: float = 1.0):
        self.scale = scale

class Buggy:
    def __init__(self, **options):
        self.size = len(options["scale"])  # a bug in the plugin, not a bad option

@hookimpl
def register_embedders(register):
    register("lambda", lambda **options: Strict(**options))
    register("lambda-buggy", lambda **options: Buggy(**options))
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """install(package, entry_point, source): a plugin package 'installed' in a folder on sys.path."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    modules: list[str] = []

    def install(package: str, entry_point: str, source: str) -> None:
        module = f"dgtest_{package.replace('-', '_')}"
        (folder / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        dist_info = folder / f"{package.replace('-', '_')}-0.1.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n",
                                            encoding="utf-8")
        (dist_info / "entry_points.txt").write_text(f"[duckgraph]\n{entry_point} = {module}\n", encoding="utf-8")
        modules.append(module)
        importlib.invalidate_caches()

    try:
        yield install
    finally:
        for module in modules:
            sys.modules.pop(module, None)


@pytest.fixture
def env(no_settings: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    return no_settings


def doctor(capsys, db: Path) -> tuple[int, dict]:
    code = main(["doctor", "--db", str(db), "--json"])
    return code, json.loads(capsys.readouterr().out)


def checks(report: dict) -> dict[str, bool]:
    return {check["check"]: check["ok"] for check in report["checks"]}


# -- a plugin that cannot be loaded ---------------------------------------------------------------------------


def test_a_plugin_that_fails_to_import_is_left_out_logged_and_named_when_used(site, caplog) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-broken", "broken", BROKEN_IMPORT)
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.plugin_manager"):
        pm = build_plugin_manager()  # raised ModuleNotFoundError, taking every command down
    expected = ("package dgtest-broken (entry point 'broken') failed to load and is left out: ModuleNotFoundError: "
                "No module named 'this_module_does_not_exist'")
    assert plugin_problems(pm) == [expected]
    assert [record.getMessage() for record in caplog.records] == [expected]
    assert not pm.has_plugin("broken")
    assert create(pm, "embedder", "good", scale=2.0).embed_query("x").shape == (4,)  # the other plugin works
    with pytest.raises(ConfigError) as info:  # using the broken one names why it is missing
        create(pm, "embedder", "broken")
    assert str(info.value).startswith("no embedder plugin with id 'broken' is installed (available: ")
    assert str(info.value).endswith(f"; what may have hidden it: {expected}")


def test_a_hook_with_a_misnamed_argument_is_left_out_with_the_fix(site) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-badargs", "badargs", BAD_HOOK_ARGS)
    pm = build_plugin_manager()  # raised pluggy's PluginValidationError
    [problem] = plugin_problems(pm)
    assert problem.startswith("package dgtest-badargs (entry point 'badargs') failed to load and is left out: "
                              "PluginValidationError: ")
    assert "{'registry'}" in problem and problem.endswith("every duckgraph hook takes one argument, named register")
    assert not pm.has_plugin("badargs")
    assert "good" in factories(pm, "embedder")


def test_hooks_pluggy_never_calls_are_reported(site) -> None:
    site("dgtest-misspelt", "misspelt", MISSPELT_HOOK)
    site("dgtest-unmarked", "unmarked", UNMARKED_HOOK)
    pm = build_plugin_manager()
    assert sorted(plugin_problems(pm)) == [
        "package dgtest-misspelt (entry point 'misspelt') implements 'register_embedder', which is not a duckgraph "
        "hook, so it is never called: did you mean 'register_embedders'?",
        "package dgtest-unmarked (entry point 'unmarked') defines register_embedders without @hookimpl (from "
        "duckgraph.ports import hookimpl), so it is never called"]
    with pytest.raises(ConfigError, match="did you mean 'register_embedders'"):
        create(pm, "embedder", "misspelt")


def test_two_packages_with_one_entry_point_name_are_both_named(site, caplog) -> None:
    site("dgtest-first", "same", GOOD)
    site("dgtest-second", "same", CLAIMS_OLLAMA)  # pluggy kept the first and dropped this one without a word
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.plugin_manager"):
        pm = build_plugin_manager()
    [problem] = plugin_problems(pm)
    # Which one comes first is the order of the folder's listing.
    [kept] = [dist.metadata["Name"] for plugin, dist in pm.list_plugin_distinfo() if plugin is pm.get_plugin("same")]
    dropped = ({"dgtest-first", "dgtest-second"} - {kept}).pop()
    assert problem == (f"packages {kept} and {dropped} both declare the duckgraph entry point 'same': only {kept}'s "
                       "plugin is loaded; uninstall one of them, or have one rename its entry point")
    assert problem in caplog.text


# -- ids registered twice ---------------------------------------------------------------------------------------


def test_an_id_a_built_in_has_names_the_package_and_says_it_must_change(site) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-thief", "thief", CLAIMS_OLLAMA)
    pm = build_plugin_manager()
    expected = ("2 plugins register the embedder id 'ollama': package dgtest-thief (entry point 'thief') and the "
                "built-in duckgraph.plugins.ollama; a built-in cannot be uninstalled, so dgtest-thief must register "
                "another id (or be uninstalled)")
    with pytest.raises(ConfigError) as info:
        create(pm, "embedder", "ollama")
    assert str(info.value) == expected
    # Only whoever uses that id is stopped: the others build, the clash is reported.
    assert create(pm, "embedder", "good").id == "good:v1"
    assert plugin_problems(pm) == [expected]


def test_an_id_two_packages_register_names_both(site) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-copycat", "copycat", CLAIMS_GOOD)
    pm = build_plugin_manager()
    with pytest.raises(ConfigError) as info:
        create(pm, "embedder", "good")
    message = str(info.value)
    assert message.startswith("2 plugins register the embedder id 'good': ")
    assert "package dgtest-good (entry point 'good')" in message
    assert "package dgtest-copycat (entry point 'copycat')" in message
    assert message.endswith("uninstall one of them, or have one register another id")


# -- a hook that raises -------------------------------------------------------------------------------------------


def test_a_hook_that_raises_is_blamed_on_its_plugin_not_on_the_configured_one(site, env, tmp_path, capsys) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-raises", "raises", HOOK_RAISES)
    env.setenv("DUCKGRAPH_EMBEDDER", "good")
    code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1
    assert report["problems"] == [
        "package dgtest-raises (entry point 'raises'): its register_embedders hook raised RuntimeError: hook crashed; "
        "its embedder plugins are left out"]
    assert checks(report) == {"plugins": False, "converters": True, "embedder": True, "database": True}
    assert report["embedder"]["id"] == "good:v1"
    assert report["plugin_ids"]["embedder"]["good"] == "dgtest-good"


# -- doctor -------------------------------------------------------------------------------------------------------


def test_doctor_lists_a_broken_plugin_as_a_problem_and_checks_the_rest(site, env, tmp_path, capsys) -> None:
    site("dgtest-good", "good", GOOD)
    site("dgtest-broken", "broken", BROKEN_IMPORT)
    env.setenv("DUCKGRAPH_EMBEDDER", "good")
    code, report = doctor(capsys, tmp_path / "kb.duckdb")  # was a traceback
    assert code == 1
    assert report["problems"] == [
        "package dgtest-broken (entry point 'broken') failed to load and is left out: ModuleNotFoundError: No module "
        "named 'this_module_does_not_exist'"]
    assert checks(report)["plugins"] is False and checks(report)["embedder"] is True
    # What DUCKGRAPH_EMBEDDER takes: the registered id, with the package that registers it.
    assert report["plugin_ids"]["embedder"]["good"] == "dgtest-good"
    assert report["plugin_ids"]["embedder"]["sentence-transformers"] == "built-in"
    assert report["community_detector"] == {"id": "leiden:max_cluster_size=25,resolution=1"}


CLAIMS_PDF_CONVERTER = '''
from duckgraph.ports import hookimpl
from duckgraph.ports.converter import ConvertedDocument

class Mine:
    suffixes = (".pdf",)

    def convert(self, data, name):
        return ConvertedDocument(text="mine", title="mine")

@hookimpl
def register_converters(register):
    register("pdf", Mine)
'''

BROKEN_CONVERTER = '''
from duckgraph.ports import hookimpl

class Todo:
    suffixes = (".todo",)

    def __init__(self):
        raise RuntimeError("no todo today")

@hookimpl
def register_converters(register):
    register("todo", Todo)
'''


def test_doctor_lists_the_converters_and_those_that_cannot_be_used(site, env, tmp_path, capsys) -> None:
    site("dgtest-todo", "todo", BROKEN_CONVERTER)
    code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1 and checks(report)["converters"] is False
    assert report["converters"][".pdf"] == "pdf" and report["converters"][".todo"] == "todo"
    assert any("todo" in problem and "no todo today" in problem for problem in report["problems"])
    assert main(["doctor", "--db", str(tmp_path / "kb.duckdb")]) == 1
    assert ".pdf (pdf)" in capsys.readouterr().out.split("converters: ")[1].splitlines()[0]


def test_a_converter_claiming_a_built_in_id_leaves_the_built_in_and_the_others_working(site, env, tmp_path,
                                                                                        capsys, caplog) -> None:
    site("dgtest-mypdf", "mypdf", CLAIMS_PDF_CONVERTER)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Plans\n\nWe ship in May.", encoding="utf-8")
    # Every ingest stopped on the clash; now it is reported and the built-in keeps its id.
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.plugin_manager"):
        code = main(["ingest", str(folder), "--db", str(tmp_path / "kb.duckdb")])
    assert code == 0, capsys.readouterr().err
    assert any("dgtest-mypdf" in r.getMessage() and "register another id" in r.getMessage() for r in caplog.records)
    capsys.readouterr()  # the ingest's own output
    code, report = doctor(capsys, tmp_path / "kb.duckdb")
    assert code == 1 and checks(report)["plugins"] is False and report["converters"][".pdf"] == "pdf"


def test_doctor_text_shows_the_registered_ids(site, env, tmp_path, capsys) -> None:
    site("dgtest-good", "good", GOOD)
    env.setenv("DUCKGRAPH_EMBEDDER", "good")
    assert main(["doctor", "--db", str(tmp_path / "kb.duckdb")]) == 0
    out = capsys.readouterr().out
    assert "check plugins: ok" in out
    assert "good (dgtest-good)" in out.split("embedder ids: ")[1].splitlines()[0]


def test_doctor_names_the_plugin_id_that_selects_the_files_embedder(site, env, tmp_path, capsys) -> None:
    db = tmp_path / "kb.duckdb"
    site("dgtest-good", "good", GOOD)
    with FakeOllama() as ollama:
        with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
            kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    env.setenv("DUCKGRAPH_EMBEDDER", "good")
    code, report = doctor(capsys, db)
    assert code == 1
    [problem] = report["problems"]
    # The setting takes 'ollama', not the embedder's id 'ollama:all-minilm:latest'.
    assert ("is configured: select its plugin again: DUCKGRAPH_EMBEDDER=ollama (use = \"ollama\" in [embedder]), "
            "with the options that gave 'ollama:all-minilm:latest', or move the knowledge") in problem


class _OtherPluginsEmbedder(HashingEmbedder):
    @property
    def id(self) -> str:  # another plugin's id: "test:..." ones share theirs, which tells to set the model back
        return "other-plugin:fake-hashing"


def test_the_mismatch_error_says_the_setting_takes_the_plugins_id(db_path: Path) -> None:
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    with KnowledgeBase(DuckDBStore(db_path), _OtherPluginsEmbedder()) as kb:
        with pytest.raises(EmbedderMismatchError) as info:
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
    message = str(info.value)
    assert "Configure 'test:fake-hashing' again (DUCKGRAPH_EMBEDDER" not in message  # told to set it to the id
    assert ("DUCKGRAPH_EMBEDDER (use in [embedder]) takes the id that plugin registers (one of the embedder ids "
            "duckgraph doctor lists), not 'test:fake-hashing'") in message


# -- options --------------------------------------------------------------------------------------------------------


def test_a_misspelt_option_behind_a_lambda_is_a_config_error_naming_the_plugin(site) -> None:
    site("dgtest-lambda", "lambdas", LAMBDA_FACTORY)
    pm = build_plugin_manager()
    with pytest.raises(ConfigError) as info:
        create(pm, "embedder", "lambda", scael=2)
    assert str(info.value) == (
        "bad options for embedder 'lambda' from package dgtest-lambda (entry point 'lambdas'): Strict.__init__() got "
        "an unexpected keyword argument 'scael' (options given: scael; set in [embedder] options or "
        "DUCKGRAPH_EMBEDDER_OPTIONS)")
    assert create(pm, "embedder", "lambda", scale=2).scale == 2
    # A TypeError deeper inside the plugin is its bug: it keeps its own type and traceback.
    with pytest.raises(TypeError, match="has no len"):
        create(pm, "embedder", "lambda-buggy", scale=2)


def test_a_misspelt_option_from_the_settings_stops_the_command_with_the_plugin_named(site, env, tmp_path,
                                                                                      capsys) -> None:
    site("dgtest-lambda", "lambdas", LAMBDA_FACTORY)
    env.setenv("DUCKGRAPH_EMBEDDER", "lambda")
    env.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", '{"scael": 2}')
    assert main(["stats", "--db", str(tmp_path / "kb.duckdb")]) == 1  # was a TypeError traceback
    err = capsys.readouterr().err
    assert "bad options for embedder 'lambda' from package dgtest-lambda" in err and "Traceback" not in err
    assert not (tmp_path / "kb.duckdb").exists()


# -- the community detector -----------------------------------------------------------------------------------------


class OneCommunity(CommunityDetector):
    """Every node in one community: easy to tell from Leiden's."""

    def __init__(self, *, label: str = "one") -> None:
        self.label = label
        self.calls = 0

    @property
    def id(self) -> str:
        return f"one:{self.label}"

    def detect(self, sources, targets, weights):
        self.calls += 1
        nodes = sorted({int(n) for n in [*sources, *targets]})
        return [Membership(node, 0, 0, None, True) for node in nodes]


class OneCommunityPlugin:
    @hookimpl
    def register_community_detectors(self, register):
        register("one", OneCommunity)


def test_the_community_detector_is_chosen_by_the_settings(plugin_manager, db_path: Path) -> None:
    plugin_manager.register(OneCommunityPlugin())
    env = {"DUCKGRAPH_COMMUNITY_DETECTOR": "one", "DUCKGRAPH_COMMUNITY_DETECTOR_OPTIONS": '{"label": "x"}'}
    services = bootstrap(load_settings(env=env, db=db_path), plugin_manager=plugin_manager,
                         embedder=HashingEmbedder())
    detector = services.knowledge_base.community_detector
    assert isinstance(detector, OneCommunity) and detector.id == "one:x"
    with services.knowledge_base as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type="Planet") for n in ("Ceres", "Jupiter", "Mars")],
                               [EdgeInput(source="Ceres", target="Jupiter", type="ORBITS_NEAR"),
                                EdgeInput(source="Mars", target="Jupiter", type="ORBITS_NEAR")])
        built = kb.communities.build("default")
    assert detector.calls == 1 and built.communities == 1


@pytest.mark.parametrize("options, wrong", [
    ('{"resolution": "high"}', "resolution must be a number greater than 0, not 'high'"),
    ('{"resolution": 0}', "resolution must be a number greater than 0, not 0"),
    ('{"max_cluster_size": 1}', "max_cluster_size must be a whole number of at least 2, not 1"),
    ('{"max_cluster_size": 2.5}', "max_cluster_size must be a whole number of at least 2, not 2.5"),
    ('{"seed": "x"}', "seed must be a whole number, not 'x'"),
])
def test_leiden_options_of_a_wrong_kind_are_a_config_error(plugin_manager, db_path: Path, options, wrong) -> None:
    # Its options are a setting now: a wrong one must be the message every command prints, not a traceback.
    env = {"DUCKGRAPH_COMMUNITY_DETECTOR_OPTIONS": options}
    with pytest.raises(ConfigError, match=re.escape(wrong)):
        bootstrap(load_settings(env=env, db=db_path), plugin_manager=plugin_manager, embedder=HashingEmbedder())


def test_the_default_community_detector_is_leiden_and_takes_options(plugin_manager, db_path: Path) -> None:
    services = bootstrap(load_settings(env={}, db=db_path), plugin_manager=plugin_manager, embedder=HashingEmbedder())
    assert isinstance(services.knowledge_base.community_detector, LeidenDetector)
    env = {"DUCKGRAPH_COMMUNITY_DETECTOR_OPTIONS": '{"max_cluster_size": 10}'}  # options alone: for leiden
    services = bootstrap(load_settings(env=env, db=db_path), plugin_manager=plugin_manager, embedder=HashingEmbedder())
    assert services.knowledge_base.community_detector.max_cluster_size == 10
    with pytest.raises(ConfigError, match="no community_detector plugin with id 'louvain'"):
        bootstrap(load_settings(env={"DUCKGRAPH_COMMUNITY_DETECTOR": "louvain"}, db=db_path),
                  plugin_manager=plugin_manager, embedder=HashingEmbedder())
