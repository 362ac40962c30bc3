"""The extractor port: turns raw text into entities and relationships."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from duckgraph.ports.records import GraphFragment


class Extractor(ABC):
    """Extracts a graph from text. Constructing one must be cheap; connect on first use."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Identity of the extractor and its model, e.g. ``ollama:qwen3:8b``."""

    @abstractmethod
    def extract(self, text: str, *, known_entities: Sequence[str] = ()) -> GraphFragment:
        """Entities and relationships found in `text`, in the `add_knowledge_graph` input shape.

        `known_entities` are names already in the graph that the text mentions; reuse them verbatim.
        Raises ExtractionError when no valid graph can be produced.
        """

    def check(self) -> None:
        """Reach the model without a full extraction (for `duckgraph doctor`); raise ExtractionError saying what
        to fix. By default there is nothing to reach."""
