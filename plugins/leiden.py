"""Community detection with hierarchical Leiden (graspologic-native: Rust, MIT; what Microsoft GraphRAG uses)."""

from __future__ import annotations

from collections.abc import Sequence

from duckgraph.ports import ConfigError, hookimpl
from duckgraph.ports.communities import CommunityDetector, Membership

#: A community larger than this is split again, one level finer (GraphRAG's default is 10; a few dozen members
#: still make a readable report, and give a few levels from coarse to fine).
DEFAULT_MAX_CLUSTER_SIZE = 25
DEFAULT_SEED = 42


class LeidenDetector(CommunityDetector):
    """Hierarchical Leiden, modularity, seeded: the same graph gives the same communities."""

    def __init__(self, *, max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE, resolution: float = 1.0,
                 seed: int = DEFAULT_SEED) -> None:
        # Options come from the user's settings: a wrong one is a ConfigError the commands print, not a traceback.
        if isinstance(max_cluster_size, bool) or not isinstance(max_cluster_size, int) or max_cluster_size < 2:
            raise ConfigError(f"leiden: max_cluster_size must be a whole number of at least 2, not {max_cluster_size!r}")
        if isinstance(resolution, bool) or not isinstance(resolution, int | float) or not resolution > 0:
            raise ConfigError(f"leiden: resolution must be a number greater than 0, not {resolution!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"leiden: seed must be a whole number, not {seed!r}")
        self.max_cluster_size = max_cluster_size
        self.resolution = resolution
        self.seed = seed

    @property
    def id(self) -> str:
        return f"leiden:max_cluster_size={self.max_cluster_size},resolution={self.resolution:g}"

    def detect(self, sources: Sequence[int], targets: Sequence[int], weights: Sequence[float]) -> list[Membership]:
        import graspologic_native  # a compiled library: loaded when communities are built
        import numpy as np

        # Plain Python values first: converting numpy scalars one by one costs seconds at a million edges.
        columns = [np.asarray(values).tolist() for values in (sources, targets, weights)]
        edges = [(str(s), str(t), float(w)) for s, t, w in zip(*columns, strict=True) if s != t]
        if not edges:
            return []
        found = graspologic_native.hierarchical_leiden(
            edges, resolution=self.resolution, max_cluster_size=self.max_cluster_size, seed=self.seed)
        return [Membership(int(c.node), c.cluster, c.level, c.parent_cluster, c.is_final_cluster) for c in found]


@hookimpl
def register_community_detectors(register):
    register("leiden", LeidenDetector)
