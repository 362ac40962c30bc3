"""duckgraph plugin: an embedder and an extractor for any OpenAI-compatible API, registered as "openai".

Registering imports no HTTP or numeric library; those load on the first request.
"""

from duckgraph.ports import hookimpl

from duckgraph_openai.embedder import OpenAIEmbedder
from duckgraph_openai.extractor import OpenAIExtractor

__all__ = ["OpenAIEmbedder", "OpenAIExtractor"]


@hookimpl
def register_embedders(register):
    register("openai", OpenAIEmbedder)


@hookimpl
def register_extractors(register):
    register("openai", OpenAIExtractor)
