"""The plugin manager and the registries of adapter factories it collects.

One broken third-party plugin never takes the others down: each entry point is loaded on its own and each plugin's
hook is called on its own. What is wrong (a plugin that cannot be imported or registered, a hook pluggy does not
know or one without @hookimpl, a hook that raises, two packages with one entry-point name, two plugins with one id)
is logged once on stderr, kept for `duckgraph doctor` (`plugin_problems`), and named by the error of a `create`
whose id is missing.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal

import pluggy

from duckgraph.ports import ConfigError, hookspecs

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "duckgraph"
# Registered by module name so core never imports an adapter module statically.
BUILTIN_PLUGINS = (
    "duckgraph.plugins.duckdb",
    "duckgraph.plugins.sentence_transformers",
    "duckgraph.plugins.ollama",
    "duckgraph.plugins.converters",
    "duckgraph.plugins.leiden",
)
PluginKind = Literal["embedder", "store", "extractor", "converter", "community_detector"]
_HOOKS: dict[PluginKind, str] = {
    "embedder": "register_embedders",
    "store": "register_stores",
    "extractor": "register_extractors",
    "converter": "register_converters",
    "community_detector": "register_community_detectors",
}
_EVERY_KIND: tuple[PluginKind, ...] = tuple(_HOOKS)


class PluginManager(pluggy.PluginManager):
    """pluggy's, keeping what is wrong with the installed plugins."""

    def __init__(self) -> None:
        super().__init__("duckgraph")
        #: Each problem (a sentence naming the plugin and its package) -> the kinds whose ids it may hide.
        self.problems: dict[str, tuple[PluginKind, ...]] = {}


def build_plugin_manager(
    *, load_entry_points: bool = True, builtins: Iterable[str] = BUILTIN_PLUGINS
) -> PluginManager:
    """Hookspecs, the built-in plugins, then (unless disabled) third-party plugins found by entry point."""
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    for module_name in builtins:
        pm.register(importlib.import_module(module_name), name=module_name)
    if load_entry_points:
        _load_entry_points(pm)
    return pm


def plugin_problems(pm: pluggy.PluginManager) -> list[str]:
    """What is wrong with the plugins, found so far (all of it once `registered_ids` has run)."""
    return list(getattr(pm, "problems", {}))


def _report(pm: pluggy.PluginManager, problem: str, hides: tuple[PluginKind, ...] = _EVERY_KIND) -> None:
    """Keep and log a problem once (stderr: stdout may be the MCP stream)."""
    problems = getattr(pm, "problems", None)
    if problems is None or problem not in problems:
        log.warning("%s", problem)
    if problems is not None:
        problems.setdefault(problem, hides)


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    # pluggy's own loop stops at the first plugin that fails, and silently keeps only the first of two packages
    # declaring one entry-point name.
    import importlib.metadata  # as pluggy does: only when entry points are loaded

    packages: dict[str, list[str]] = {}  # entry-point name -> the distributions declaring it
    for dist in importlib.metadata.distributions():
        for entry_point in dist.entry_points:
            if entry_point.group == ENTRY_POINT_GROUP:
                names = packages.setdefault(entry_point.name, [])
                dist_name = dist.metadata["Name"] or "(a distribution without a name)"
                if dist_name not in names:  # one distribution found twice on sys.path is one
                    names.append(dist_name)
    for name, dists in packages.items():
        if len(dists) > 1:
            _report(pm, f"packages {' and '.join(dists)} both declare the duckgraph entry point {name!r}: only "
                        f"{dists[0]}'s plugin is loaded; uninstall one of them, or have one rename its entry point")
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)  # the first distribution's, as pluggy does
        except Exception as exc:  # whatever a plugin's import or registration raises
            if pm.has_plugin(name):  # pluggy before 1.6 could leave a half-registered plugin
                pm.unregister(name=name)
            hint = ("; every duckgraph hook takes one argument, named register"
                    if isinstance(exc, pluggy.PluginValidationError) else "")
            _report(pm, f"{_who(pm, name, dists[0])} failed to load and is left out: {_said(exc)}{hint}")
            continue
        _check_hooks(pm, name, dists[0])


def _check_hooks(pm: pluggy.PluginManager, name: str, package: str) -> None:
    """Hooks pluggy accepts but never calls: a name no hookspec has, or a function without @hookimpl."""
    plugin = pm.get_plugin(name)
    known = sorted(_HOOKS.values())
    for caller in pm.get_hookcallers(plugin) or ():
        if not caller.has_spec() and any(impl.plugin is plugin and not impl.optionalhook
                                         for impl in caller.get_hookimpls()):
            close = difflib.get_close_matches(caller.name, known, n=1)
            _report(pm, f"{_who(pm, name, package)} implements {caller.name!r}, which is not a duckgraph hook, so it "
                        "is never called: " + (f"did you mean {close[0]!r}?" if close else f"the hooks are "
                                                                                           f"{', '.join(known)}"))
    for hook_name in known:
        if callable(getattr(plugin, hook_name, None)) and pm.parse_hookimpl_opts(plugin, hook_name) is None:
            _report(pm, f"{_who(pm, name, package)} defines {hook_name} without @hookimpl (from duckgraph.ports "
                        "import hookimpl), so it is never called")


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: " + "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _is_builtin(name: str) -> bool:
    return name.startswith("duckgraph.plugins.")


def _package(pm: pluggy.PluginManager, name: str) -> str | None:
    """The distribution that installed the plugin registered as `name`, if an entry point did."""
    plugin = pm.get_plugin(name)
    return next((dist.metadata["Name"] for found, dist in pm.list_plugin_distinfo() if found is plugin), None)


def _who(pm: pluggy.PluginManager, name: str, package: str | None = None) -> str:
    if _is_builtin(name):
        return f"the built-in {name}"
    package = package or _package(pm, name)
    return f"package {package} (entry point {name!r})" if package else f"plugin {name!r}"


def _label(pm: pluggy.PluginManager, name: str) -> str:
    return "built-in" if _is_builtin(name) else _package(pm, name) or name


def _registrations(pm: pluggy.PluginManager, kind: PluginKind) -> dict[str, list[tuple[str, Callable[..., Any]]]]:
    """Every (plugin name, factory) registered for `kind`, by id, in pluggy's call order (the plugins registered
    last, the installed ones, first). A hook that raises is reported and that plugin's registrations left out."""
    hook = getattr(pm.hook, _HOOKS[kind])
    found: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
    for impl in reversed(hook.get_hookimpls()):  # called one by one, so that a failure is that plugin's alone
        made: list[tuple[str, Callable[..., Any]]] = []

        def register(plugin_id: str, factory: Callable[..., Any], made=made) -> None:
            made.append((plugin_id, factory))

        try:
            impl.function(*(register for _ in impl.argnames))
        except Exception as exc:
            _report(pm, f"{_who(pm, impl.plugin_name)}: its {hook.name} hook raised {_said(exc)}; its {kind} "
                        "plugins are left out", (kind,))
            continue
        for plugin_id, factory in made:
            found.setdefault(plugin_id, []).append((impl.plugin_name, factory))
    return found


def _duplicate(pm: pluggy.PluginManager, kind: PluginKind, plugin_id: str, plugins: list[str]) -> str:
    """Names every plugin registering one id; a built-in keeps its id, so the others must change theirs."""
    others = [_package(pm, name) or repr(name) for name in plugins if not _is_builtin(name)]
    if len(others) < len(plugins):
        fix = (f"a built-in cannot be uninstalled, so {' and '.join(others)} must register another id (or be "
               "uninstalled)")
    else:
        fix = "uninstall one of them, or have one register another id"
    return (f"{len(plugins)} plugins register the {kind} id {plugin_id!r}: "
            f"{' and '.join(_who(pm, name) for name in plugins)}; {fix}")


def factories(pm: pluggy.PluginManager, kind: PluginKind) -> dict[str, Callable[..., Any]]:
    """Every factory registered for `kind`, by id. A duplicate id is a ConfigError naming both plugins."""
    found: dict[str, Callable[..., Any]] = {}
    for plugin_id, plugins in _registrations(pm, kind).items():
        if len(plugins) > 1:
            raise ConfigError(_duplicate(pm, kind, plugin_id, [name for name, _ in plugins]))
        found[plugin_id] = plugins[0][1]
    return found


def usable_factories(pm: pluggy.PluginManager, kind: PluginKind) -> dict[str, Callable[..., Any]]:
    """Every factory of a kind whose adapters are all used at once (converters), by id. An id registered twice is
    reported (log, doctor), not an error that stops them all: the built-in keeps it, else neither is used."""
    registered = _registrations(pm, kind)
    _report_clashes(pm, kind, registered)
    found: dict[str, Callable[..., Any]] = {}
    for plugin_id, plugins in registered.items():
        if len(plugins) > 1:
            plugins = [(name, factory) for name, factory in plugins if _is_builtin(name)]
        if len(plugins) == 1:
            found[plugin_id] = plugins[0][1]
    return found


def _report_clashes(pm: pluggy.PluginManager, kind: PluginKind,
                    registered: dict[str, list[tuple[str, Callable[..., Any]]]], but: str | None = None) -> None:
    """Report (log, doctor) every id of `registered` that several plugins register, but `but`."""
    for plugin_id, plugins in registered.items():
        if len(plugins) > 1 and plugin_id != but:
            _report(pm, _duplicate(pm, kind, plugin_id, [name for name, _ in plugins]), ())


def registered_ids(pm: pluggy.PluginManager) -> dict[PluginKind, dict[str, str]]:
    """For `duckgraph doctor`: each kind's ids and who registers them ('built-in' or the package). Calling every
    hook, it reports the hooks that raise and the ids registered twice."""
    ids: dict[PluginKind, dict[str, str]] = {}
    for kind in _HOOKS:
        registered = _registrations(pm, kind)
        _report_clashes(pm, kind, registered)
        ids[kind] = {plugin_id: " and ".join(_label(pm, name) for name, _ in plugins)
                     for plugin_id, plugins in sorted(registered.items())}
    return ids


def create(pm: pluggy.PluginManager, kind: PluginKind, plugin_id: str, /, *args: Any, **options: Any) -> Any:
    """Build the adapter registered as `plugin_id`; unknown ids and bad options are ConfigErrors. Another id
    registered twice is reported, not an error: only whoever uses it cannot tell which plugin is meant."""
    registered = _registrations(pm, kind)
    _report_clashes(pm, kind, registered, but=plugin_id)
    if plugin_id not in registered:
        known = ", ".join(sorted(registered)) or "none"
        hidden = [problem for problem, kinds in getattr(pm, "problems", {}).items() if kind in kinds]
        why = f"; what may have hidden it: {' | '.join(hidden)}" if hidden else ""
        raise ConfigError(f"no {kind} plugin with id {plugin_id!r} is installed (available: {known}){why}")
    if len(registered[plugin_id]) > 1:
        raise ConfigError(_duplicate(pm, kind, plugin_id, [name for name, _ in registered[plugin_id]]))
    owner, factory = registered[plugin_id][0]
    try:
        # Checked against the signature so a TypeError raised inside a plugin is not mistaken for bad options.
        signature = inspect.signature(factory)
        signature.bind(*args, **options)
    except TypeError as exc:
        raise _bad_options(pm, kind, plugin_id, owner, options, exc) from exc
    except ValueError:  # no signature to check (some builtins); let the call speak for itself
        signature = None
    try:
        return factory(*args, **options)
    except TypeError as exc:
        if options and _options_unchecked(signature) and _raised_by_the_call(exc):
            raise _bad_options(pm, kind, plugin_id, owner, options, exc) from exc
        raise


def _bad_options(pm: pluggy.PluginManager, kind: PluginKind, plugin_id: str, owner: str, options: dict[str, Any],
                 exc: TypeError) -> ConfigError:
    given = ", ".join(sorted(options)) or "none"
    return ConfigError(f"bad options for {kind} {plugin_id!r} from {_who(pm, owner)}: {exc} (options given: {given}; "
                       f"set in [{kind}] options or DUCKGRAPH_{kind.upper()}_OPTIONS)")


def _options_unchecked(signature: inspect.Signature | None) -> bool:
    """Whether the factory's signature let any option through (`lambda **options: ...`, or none to read)."""
    return signature is None or any(parameter.kind is inspect.Parameter.VAR_KEYWORD
                                    for parameter in signature.parameters.values())


def _raised_by_the_call(exc: TypeError) -> bool:
    """Whether the TypeError came from the factory's own frame (it passed the options on to a constructor that
    refused them), not from deeper inside the plugin, where it is the plugin's bug and must keep its traceback."""
    frames, tb = 0, exc.__traceback__
    while tb is not None:
        frames, tb = frames + 1, tb.tb_next
    return frames <= 2  # create's own frame, then at most the factory's


def reselect_embedder(embedder_id: str, registered: Iterable[str] = ()) -> str:
    """How to select again the embedder that gives `embedder_id`. The setting takes the id its plugin registers
    (sentence-transformers), not the embedder's own id (sentence-transformers:all-MiniLM-L6-v2); with the
    registered ids known, the one the embedder's id starts with is named."""
    plugin = next((name for name in registered if embedder_id.split(":")[0] == name), None)
    if plugin is not None:
        return (f"select its plugin again: DUCKGRAPH_EMBEDDER={plugin} (use = \"{plugin}\" in [embedder]), with the "
                f"options that gave {embedder_id!r}")
    return (f"select the plugin that gives {embedder_id!r} again: DUCKGRAPH_EMBEDDER (use in [embedder]) takes the "
            f"id that plugin registers (one of the embedder ids duckgraph doctor lists), not {embedder_id!r}, with "
            "the options that gave it")


def embedder_mismatch(path: object, bound: tuple[str, int], configured: str, *, registered: Iterable[str] = (),
                      dimensions: int | None = None, file: str | None = None) -> str:
    """Why a file's vectors (`bound`: the id and width it records) do not fit the configured embedder, and the two
    ways on: configure what gave them again, or move the knowledge to a new file. The one wording of the knowledge
    base's refusal and of `duckgraph doctor`. `dimensions`: what the configured embedder gives, when known;
    `registered`: the plugin ids, when known; `file`: how the head names the file (default: its path)."""
    bound_id, bound_dimensions = bound
    file = file or str(path)
    if configured == bound_id:  # one name, another width: its options or the model behind the name changed
        head = (f"{file} was built with {bound_id!r} but '{configured} ({dimensions} dimensions, the file has "
                f"{bound_dimensions})' is configured")
        fix = f"set its options or server back to give {bound_dimensions}"
    elif configured.split(":")[0] == bound_id.split(":")[0]:  # the plugin is selected: its model or options differ
        head = (f"the configured embedder gives {configured!r} while {file} holds vectors of {bound_id!r} "
                f"({bound_dimensions} dimensions)")
        fix = (f"set its model and options (DUCKGRAPH_EMBEDDER_OPTIONS, options in [embedder]) back to those that "
               f"gave {bound_id!r}")
    else:
        head = f"{file} was built with {bound_id!r} but {configured!r} is configured"
        fix = reselect_embedder(bound_id, registered)
    return (f"{head}: {fix}, or move the knowledge to a new file with the new embedder: duckgraph export -o kb.jsonl "
            f"--db {path}, then duckgraph import --re-embed kb.jsonl --db NEW.duckdb")
