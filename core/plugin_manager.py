"""The plugin manager and the registries of adapter factories it collects."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any, Literal

import pluggy

from duckgraph.ports import ConfigError, hookspecs

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


def build_plugin_manager(
    *, load_entry_points: bool = True, builtins: Iterable[str] = BUILTIN_PLUGINS
) -> pluggy.PluginManager:
    """Hookspecs, the built-in plugins, then (unless disabled) third-party plugins found by entry point."""
    pm = pluggy.PluginManager("duckgraph")
    pm.add_hookspecs(hookspecs)
    for module_name in builtins:
        pm.register(importlib.import_module(module_name), name=module_name)
    if load_entry_points:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return pm


def factories(pm: pluggy.PluginManager, kind: PluginKind) -> dict[str, Callable[..., Any]]:
    """Every factory registered for `kind`, by id. A duplicate id is a ConfigError naming both plugins."""
    found: dict[str, Callable[..., Any]] = {}

    def register(plugin_id: str, factory: Callable[..., Any]) -> None:
        if plugin_id in found:
            raise ConfigError(f"two plugins register the {kind} id {plugin_id!r}; uninstall one of them")
        found[plugin_id] = factory

    getattr(pm.hook, _HOOKS[kind])(register=register)
    return found


def create(pm: pluggy.PluginManager, kind: PluginKind, plugin_id: str, /, *args: Any, **options: Any) -> Any:
    """Build the adapter registered as `plugin_id`; unknown ids and bad options are ConfigErrors."""
    available = factories(pm, kind)
    if plugin_id not in available:
        known = ", ".join(sorted(available)) or "none"
        raise ConfigError(f"no {kind} plugin with id {plugin_id!r} is installed (available: {known})")
    factory = available[plugin_id]
    try:
        # Checked against the signature so a TypeError raised inside a plugin is not mistaken for bad options.
        inspect.signature(factory).bind(*args, **options)
    except TypeError as exc:
        raise ConfigError(f"bad options for {kind} {plugin_id!r}: {exc}") from exc
    except ValueError:  # no signature to check (some builtins); let the call speak for itself
        pass
    return factory(*args, **options)
