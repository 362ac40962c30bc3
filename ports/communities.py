"""The community ports: a detector that partitions a weighted graph hierarchically, and the records of the
communities and their reports that the store keeps (derived data: rebuilt from the graph at any time)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple


class Membership(NamedTuple):
    """Node `node` is in cluster `cluster` at `level` (0: coarsest); `parent` is its cluster one level up.
    A tuple: a build makes one per node and level, millions at a million entities."""

    node: int
    cluster: int
    level: int
    parent: int | None
    final: bool


class CommunityDetector(ABC):
    """Partitions a weighted graph into communities, coarse to fine. Constructing one must be cheap."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Identity of the algorithm and its settings, e.g. ``leiden:max_cluster_size=25``."""

    @abstractmethod
    def detect(self, sources: Sequence[int], targets: Sequence[int], weights: Sequence[float]) -> list[Membership]:
        """Memberships of every node that has an edge: one per level it is split at, the last `final`.
        Deterministic for the same input."""


@dataclass(slots=True)
class CommunityRecord:
    """A stored community and its report. `id` is None until stored; `parent` is a community id."""

    namespace: str
    level: int
    members: tuple[int, ...]
    parent: int | None = None
    leaf: bool = True  # no finer community under it
    title: str = ""
    summary: str = ""
    #: {"entities": [{"name", "type"}], "facts": [str], "passages": [str]}: what the report names.
    details: dict[str, Any] = field(default_factory=dict)
    #: Who wrote the report: "extractive", "model" or "host"; `stale` once its members changed.
    author: str = "extractive"
    stale: bool = False
    #: How many members the report was written for (as stored): more than `members` once some were deleted.
    written_for: int = 0
    id: int | None = None
    embedding: Any = None
    #: Position of the community in the build (parents refer to it before they have ids).
    ref: int = 0
    parent_ref: int | None = None


@dataclass(frozen=True, slots=True)
class CommunityBuild:
    """What the store records of the last build of a namespace, to tell how fresh it is."""

    namespace: str
    built_at: datetime
    nodes: int
    edges: int
    detector: str
