"""The document converters plugins register (ports/converter.py), found by file suffix and by media type. A
third-party plugin's converter is asked first, so it replaces the built-in one of the formats it names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from duckgraph.core.plugin_manager import factories

if TYPE_CHECKING:
    import pluggy

    from duckgraph.ports.converter import DocumentConverter


@dataclass
class Converters:
    by_suffix: dict[str, DocumentConverter] = field(default_factory=dict)
    by_media_type: dict[str, DocumentConverter] = field(default_factory=dict)


def load_converters(pm: pluggy.PluginManager) -> Converters:
    # pluggy calls the plugins registered last (installed ones) before the built-ins: the first to name a format
    # keeps it.
    found = Converters()
    for factory in factories(pm, "converter").values():
        converter = factory()
        for suffix in converter.suffixes:
            found.by_suffix.setdefault(suffix.lower(), converter)
        for media_type in converter.media_types:
            found.by_media_type.setdefault(media_type.lower(), converter)
    return found
