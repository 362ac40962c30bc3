"""The composition root: settings + plugin manager -> services. Every adapter can be passed in instead."""

from __future__ import annotations

from dataclasses import dataclass

import pluggy

from duckgraph.core.config import Settings, load_settings
from duckgraph.core.plugin_manager import build_plugin_manager, create
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.core.web.add_urls import UrlFetching
from duckgraph.ports import Embedder, Extractor, GraphStore


@dataclass
class Services:
    settings: Settings
    plugin_manager: pluggy.PluginManager
    knowledge_base: KnowledgeBase
    #: Pages and sites fetched by `ingest` and the `add_urls` tool (which refuses unless the settings allow it).
    url_fetching: UrlFetching
    extractor: Extractor | None = None


def bootstrap(
    settings: Settings | None = None,
    *,
    plugin_manager: pluggy.PluginManager | None = None,
    store: GraphStore | None = None,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    url_fetching: UrlFetching | None = None,
) -> Services:
    """Wire the services. Nothing is opened or loaded here: the store opens and the model loads on first use."""
    settings = settings or load_settings()
    pm = plugin_manager or build_plugin_manager()
    if store is None:
        store = create(pm, "store", settings.store.use, settings.db, **settings.store.options)
    if embedder is None:
        embedder = create(pm, "embedder", settings.embedder.use, **settings.embedder.options)
    if extractor is None and settings.extractor is not None:
        extractor = create(pm, "extractor", settings.extractor.use, **settings.extractor.options)
    knowledge_base = KnowledgeBase(store, embedder, namespace=settings.default_namespace, extractor=extractor,
                                   search_defaults=SearchOptions(relevance_floor=settings.relevance_floor),
                                   community_detector=create(pm, "community_detector", settings.community_detector.use,
                                                             **settings.community_detector.options))
    return Services(settings=settings, plugin_manager=pm, knowledge_base=knowledge_base, extractor=extractor,
                    url_fetching=url_fetching or UrlFetching(settings, pm))
