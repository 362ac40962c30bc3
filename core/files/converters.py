"""The document converters plugins register (ports/converter.py), found by file suffix and by media type.

A converter is a plugin's code: whatever it does wrong is about the files it reads, never the whole ingest. One that
cannot be built (its factory raises, or an instance was registered instead of a class) or that names a suffix or a
media type that is not one is reported when the converters are loaded, and the files of the suffixes it names are
skipped with that reason. A working one is called through `Converter.convert`, which turns any exception into a
ConversionError naming the converter and refuses a result that is not a ConvertedDocument.

Suffixes are lower case (matched without regard to case), start with a dot, and may have several parts
(".todo.txt"): a file is read by the converter of the longest suffix its name ends with. When two converters name
one suffix (or media type), the one used is, in this order: one that works over one that cannot be built, an
installed plugin's over a built-in one (so a plugin replaces the built-in reader of a format), then the id first in
alphabetical order (not the order plugins happen to load in). A clash between two installed plugins is logged as a
warning; a plugin replacing a built-in one is logged at INFO.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duckgraph.core.plugin_manager import usable_factories
from duckgraph.ports import DuckgraphError
from duckgraph.ports.converter import ConversionError, ConvertedDocument, DocumentConverter

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger(__name__)

#: One or more parts, each a dot and then no dot, slash, backslash or space: ".pdf", ".todo.txt".
_SUFFIX = re.compile(r"(?:\.[^./\\\s]+)+")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
_BUILTIN = "duckgraph.plugins."


@dataclass(frozen=True)
class Converter:
    """A registered converter and its plugin id; `failure` says why it cannot be used (then `plugin` is None)."""

    id: str
    plugin: DocumentConverter | None = None
    failure: str = ""
    #: Where the factory is defined ("probe_todo.TodoConverter"): names the plugin in messages.
    origin: str = ""

    @property
    def builtin(self) -> bool:
        return self.origin.startswith(_BUILTIN)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        """The plugin's conversion of `data`; any failure, or a result of the wrong shape, is a ConversionError
        naming this converter (its own message kept: "converter 'pdf': not a readable PDF ...")."""
        if self.plugin is None:
            raise ConversionError(self.failure)
        try:
            converted = self.plugin.convert(data, name)
        except DuckgraphError as exc:  # the plugin's own message (MissingExtraError's says what to install)
            raise ConversionError(f"converter {self.id!r}: {exc}") from exc
        except Exception as exc:  # a plugin's bug costs the file it was reading, not the ingest
            log.info("converter %r (%s) failed on %s", self.id, self.origin, name, exc_info=True)
            raise ConversionError(f"converter {self.id!r} failed: {type(exc).__name__}: {exc}") from exc
        if problem := _wrong_shape(converted):
            raise ConversionError(f"converter {self.id!r} returned {problem}: convert must return "
                                  "ConvertedDocument(text=str, title=str, time=ISO 8601 str or None, metadata=dict)")
        return converted


@dataclass
class Converters:
    by_suffix: dict[str, Converter] = field(default_factory=dict)
    by_media_type: dict[str, Converter] = field(default_factory=dict)
    #: What is wrong, one line each: converters that cannot be used, then suffix and media type clashes.
    problems: list[str] = field(default_factory=list)
    #: The built-in readers that plugins replace, as intended (one line each).
    replaced: list[str] = field(default_factory=list)


def load_converters(pm: pluggy.PluginManager) -> Converters:
    """The converters of every plugin, with their problems logged (see the module)."""
    found = _load(pm)
    for problem in found.problems:
        log.warning("%s", problem)
    for replaced in found.replaced:  # what a plugin is meant to do: said, not warned about
        log.info("%s", replaced)
    return found


def converter_overview(pm: pluggy.PluginManager) -> tuple[dict[str, str], list[str]]:
    """For `duckgraph doctor`: each suffix and the id of the converter that reads it, and what is wrong (converters
    that cannot be used and why, suffix and media type clashes and which converter wins), one line each."""
    found = _load(pm)
    return {suffix: c.id for suffix, c in sorted(found.by_suffix.items())}, found.problems


def _load(pm: pluggy.PluginManager) -> Converters:
    claims: dict[str, dict[str, list[Converter]]] = {"suffix": {}, "media type": {}}
    found = Converters()
    for plugin_id, factory in usable_factories(pm, "converter").items():
        converter, suffixes, media_types = _built(plugin_id, factory)
        if converter.failure:
            found.problems.append(converter.failure)
        for key, names in (("suffix", suffixes), ("media type", media_types)):
            for name in names:
                claims[key].setdefault(name, []).append(converter)
    for key, table in (("suffix", found.by_suffix), ("media type", found.by_media_type)):
        for name, candidates in sorted(claims[key].items()):
            ranked = sorted(candidates, key=lambda c: (bool(c.failure), c.builtin, c.id))
            table[name] = ranked[0]
            if len(ranked) > 1 and all(c.builtin for c in ranked[1:]) and not ranked[0].failure:
                found.replaced.append(f"the {key} {name} is read by converter {ranked[0].id!r} "
                                      f"({ranked[0].origin}), not by the built-in {ranked[1].id!r}")
            elif len(ranked) > 1:
                found.problems.append(_clash(key, name, ranked))
    return found


def _clash(key: str, name: str, ranked: list[Converter]) -> str:
    winner, others = ranked[0], ranked[1:]
    others_text = ", ".join(f"{c.id!r} ({c.origin})" for c in others)
    return (f"two converters read the {key} {name}: {winner.id!r} ({winner.origin}) is used, not {others_text} "
            "(one that works comes first, then an installed plugin's before a built-in one, then the id first in "
            f"alphabetical order); uninstall the plugin you do not want, or ask its author to drop {name}")


def _built(plugin_id: str, factory: Callable[..., Any]) -> tuple[Converter, list[str], list[str]]:
    """The converter `factory` builds, with the suffixes and media types it claims (lower case). One that cannot be
    built, or that names a bad suffix or media type, carries why and still claims what it names (a suffix written
    without its dot as the suffix meant), so that those files are skipped with the reason."""
    origin = _origin(factory)
    who = f"converter {plugin_id!r} ({origin})"
    instance: Any = None
    problem = ""
    if isinstance(factory, DocumentConverter):
        declared: Any = factory
        problem = (f"is registered as an instance, not a class: register({plugin_id!r}, "
                   f"{type(factory).__name__}) without the ()")
    elif not callable(factory):
        declared, problem = factory, f"is registered as {type(factory).__name__}, not a class"
    else:
        declared = factory  # a class's suffixes are known even when it cannot be built
        try:
            instance = factory()
        except Exception as exc:
            log.info("%s cannot be built", who, exc_info=True)
            problem = f"cannot be built: {type(exc).__name__}: {exc}"
        else:
            declared = instance
            if not callable(getattr(instance, "convert", None)):
                problem = (f"built {type(instance).__name__}, which has no convert method: subclass "
                           "duckgraph.ports.converter.DocumentConverter")
    suffixes, bad_suffix = _names(getattr(declared, "suffixes", ()), "suffixes", _suffix)
    media_types, bad_type = _names(getattr(declared, "media_types", ()), "media_types", _media_type)
    problem = problem or bad_suffix or bad_type
    if problem:
        claimed = f" (files {', '.join(suffixes)} are skipped)" if suffixes else ""
        return Converter(plugin_id, None, f"{who} {problem}{claimed}", origin), suffixes, media_types
    return Converter(plugin_id, instance, "", origin), suffixes, media_types


def _names(declared: Any, attribute: str, check: Callable[[Any], tuple[str | None, str]]) -> tuple[list[str], str]:
    """The names `declared` claims and the first thing wrong with them ("" when nothing is)."""
    if isinstance(declared, str) or not isinstance(declared, Iterable):
        return [], f"has {attribute} = {declared!r}: it must be a tuple of strings, e.g. {_EXAMPLE[attribute]}"
    names, problem = [], ""
    for item in declared:
        name, wrong = check(item)
        if name is not None:
            names.append(name)
        problem = problem or (f"is refused: {attribute} holds {item!r}, {wrong}" if wrong else "")
    return list(dict.fromkeys(names)), problem


_EXAMPLE = {"suffixes": "('.todo',)", "media_types": "('text/x-todo',)"}


def _suffix(item: Any) -> tuple[str | None, str]:
    """(the suffix claimed, or None; what is wrong, or "")."""
    if not isinstance(item, str):
        return None, "not a string"
    lowered = item.lower()
    if _SUFFIX.fullmatch(lowered):
        return lowered, ""
    if _SUFFIX.fullmatch("." + lowered):  # the suffix meant: its files are reported, not silently not read
        return "." + lowered, f"which has no leading dot: write {'.' + item!r}"
    return None, "which is not a file suffix: a dot and then letters or digits, e.g. '.todo' or '.todo.txt'"


def _media_type(item: Any) -> tuple[str | None, str]:
    if isinstance(item, str) and _MEDIA_TYPE.fullmatch(item.lower()):
        return item.lower(), ""
    return None, "which is not a media type such as 'text/x-todo' (no parameters such as '; charset=...')"


def _origin(factory: Any) -> str:
    # A class or a function names itself; an instance registered by mistake, its class.
    named = isinstance(factory, type) or (callable(factory) and not isinstance(factory, DocumentConverter))
    kind = factory if named else type(factory)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', type(kind).__name__)}"


def _wrong_shape(converted: Any) -> str:
    """What is wrong with a converter's result, as "a str, not a ConvertedDocument"; "" when nothing is."""
    if not isinstance(converted, ConvertedDocument):
        return f"{_kind(converted)}, not a ConvertedDocument"
    if not isinstance(converted.text, str):
        return f"a text that is {_kind(converted.text)}, not a str"
    if not isinstance(converted.title, str):
        return f"a title that is {_kind(converted.title)}, not a str"
    if converted.time is not None and not isinstance(converted.time, str):
        return f"a time that is {_kind(converted.time)}, not an ISO 8601 str or None"
    if not isinstance(converted.metadata, dict) or not all(isinstance(k, str) for k in converted.metadata):
        return f"metadata that is {_kind(converted.metadata)}, not a dict with str keys"
    try:
        json.dumps(converted.metadata)
    except (TypeError, ValueError) as exc:
        return f"metadata that is not plain JSON ({exc})"
    return ""


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"
