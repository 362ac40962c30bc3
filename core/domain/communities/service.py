"""The community use cases of one knowledge base: build, keep fresh, global search, reports written by the
configured model or by the host, and what `search` says about its anchors' communities."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.communities import global_search as ranking
from duckgraph.core.domain.communities.build import BuildOutcome, build
from duckgraph.core.domain.communities.freshness import Freshness, Keeper, drop_deleted, touches
from duckgraph.core.domain.communities.hierarchy import level_view, reuse_reports
from duckgraph.core.domain.communities.reports import (
    OBSERVED,
    WRITTEN_AT,
    as_now,
    material,
    observed,
    report_text,
    without_deleted_counts,
)
from duckgraph.core.domain.limits import MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from duckgraph.core.domain.moments import iso_utc
from duckgraph.core.domain.moments import now as now_utc
from duckgraph.core.domain.namespaces import EMPTY_NAMESPACE, namespace_hint
from duckgraph.ports import ExtractionError, InvalidInputError, NotFoundError, StoreError
from duckgraph.ports.communities import CommunityBuild, CommunityDetector, CommunityRecord
from duckgraph.ports.names import entity_key, name_candidates
from duckgraph.ports.text import one_line

if TYPE_CHECKING:
    from duckgraph.core.domain.ingest import Progress
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import (
        BuildCommunitiesResult, CommunityFreshness, CommunityReport, GlobalSearchResult, ReportsToWrite,
        ReportsWritten, ScoredNode)
    from duckgraph.ports.extractor import Extractor

NO_COMMUNITIES = ("No communities are built for this namespace yet: call build_communities (or run `duckgraph "
                  "communities build`), then global_search again.")
NO_RELATIONS = ("No communities: the last build found no relation between this namespace's entities, and communities "
                "group related entities. Nothing to build until relations are stored (a running server then builds "
                "them on its own; else run `duckgraph communities build`).")
#: Before a build or after one that found nothing: documents, and no entity for communities to group.
NO_ENTITIES = ("No communities: this namespace holds documents but no entities, as they were stored without "
               "extraction (no extractor read them), and communities group related entities. To get entities, "
               "configure an extractor (DUCKGRAPH_EXTRACTOR=ollama, or an [extractor] section in the config file; "
               "docs/ollama.md) and run `duckgraph ingest --extract` on the same files again, or have the host "
               "extract them (the extract_knowledge prompt: add_knowledge_graph with the documents' ids in "
               "source_ids). Meanwhile search finds their passages.")
#: After a build that found no relation, when relations were stored since: a build of them is under way (this
#: process's keeper will start it once writes settle), or none is.
BUILD_PENDING = ("No communities yet: the last build found no relation between this namespace's entities, and "
                 "relations were stored since; a build of them is under way: ask again in a moment.")
BUILD_DUE = ("No communities yet: the last build found no relation between this namespace's entities, and relations "
             "were stored since: call build_communities (or run `duckgraph communities build`), then global_search "
             "again.")
NONE_LEFT = ("No communities left: every entity of the last build's communities was deleted since. A running server "
             "builds them again once writes settle; else call build_communities.")
BROAD_HINT = ("This question seems to be about the memory as a whole (its best matches are weak or spread over "
              "several communities): global_search answers such questions from community reports.")
#: After "nothing relevant" (render.NOTHING_RELEVANT says to say so): only a question about the whole goes on.
BROAD_IF_NOTHING = ("If the question is about the memory as a whole (its themes, what it holds), global_search "
                    "answers it from community reports instead.")
#: search adds BROAD_HINT when its best anchors fall in at least this many top-level communities, none holding half.
SPREAD_COMMUNITIES = 3
#: The best anchors: those at least this share as relevant as the best one.
NEAR_BEST = 0.8
#: The closing line names at most these of the entities changed since the reports shown were built.
CHANGED_NAMED = 5
#: The closing line on the entities no report holds yet (see freshness.Unreported): how many, one by name, and
#: whether a rebuild that includes them is under way.
UNREPORTED = "({count} written or linked since the last build {are} in no report yet{example}; {then}.)"


class CommunityService:
    def __init__(self, kb: KnowledgeBase, detector: CommunityDetector | None) -> None:
        self.kb = kb
        self.detector = detector
        self.keeper = Keeper(kb.store, self._rebuild_quietly, shrunk=self._shrunk, members=self._members)
        #: namespace -> (key, its communities, the keeper's count of writes when their facts were last checked,
        #: the same communities by id)
        self._catalog: dict[str, tuple[Any, list[CommunityRecord], int, dict[int, CommunityRecord]]] = {}
        #: namespace -> (key, the entities changed since the build, its communities (by id) as global_search shows
        #: them: see `_as_now`)
        self._current: dict[str, tuple[Any, dict[int, str] | None, dict[int, CommunityRecord]]] = {}
        self._version = 0  # bumped by every change of communities or reports made here
        self._build_lock = threading.Lock()

    # -- building ------------------------------------------------------------------------------------------

    def build(self, namespace: str, progress: Progress | None = None) -> BuildCommunitiesResult:
        """build_communities, `duckgraph communities build`: a namespace that holds nothing and was never built (a
        misspelt one) is refused, naming those there are: a build there would report success with nothing."""
        from duckgraph.core.domain.model import BuildCommunitiesResult

        self.kb.open()
        held = self.kb.store.namespaces()
        if namespace not in held and self.kb.store.community_build(namespace) is None:
            raise NotFoundError(f"the namespace {namespace!r} holds nothing to build communities from: "
                                f"{namespace_hint(namespace, held)}; nothing was built")
        outcome = self._build(namespace, progress)
        return BuildCommunitiesResult(**outcome.__dict__)

    def _build(self, namespace: str, progress: Progress | None = None, *, background: bool = False) -> BuildOutcome:
        cancelled = self.keeper.stopped if background else (lambda: False)
        with self._build_lock:  # one build at a time: a background rebuild and a call never interleave
            try:
                return build(self.kb, self.detector, namespace, progress, cancelled)
            finally:
                self._changed()

    def _rebuild_quietly(self, namespace: str) -> None:
        self._build(namespace, background=True)

    def _shrunk(self, namespace: str) -> bool:
        """Whether a community of the namespace lost members, or a fact or passage its report cites (or, a written
        one, an observation of an entity it names), since the report was written (the Keeper then rebuilds:
        global_search withholds such a report's text until then)."""
        return any(ranking.withheld(c) for c in self._communities(namespace))

    def _members(self, namespace: str) -> set[int]:
        """The entities of the namespace's communities now (the keeper's `unreported`)."""
        return {node for community in self._communities(namespace) for node in community.members}

    def _changed(self) -> None:
        self._version += 1
        self._catalog.clear()
        self._current.clear()

    def _communities(self, namespace: str) -> list[CommunityRecord]:
        """The namespace's communities with their members, cached until this service changes them or a build of
        another process is seen."""
        return self._catalog_of(namespace)[1]

    def _catalog_of(self, namespace: str) -> tuple[CommunityBuild | None, list[CommunityRecord]]:
        """The last build and its communities (`_held_catalog`)."""
        build_mark, found, _ = self._held_catalog(namespace)
        return build_mark, found

    def _held_catalog(self, namespace: str
                      ) -> tuple[CommunityBuild | None, list[CommunityRecord], dict[int, CommunityRecord]]:
        """The last build, and its communities that still have a member (a deletion or a merge takes members out:
        the store marks their reports stale; a community left with none is no answer to anything), without the
        facts, passages and observations deleted since (their reports are stale and withheld: `drop_deleted`); and
        the same communities by id."""
        self.kb.open()  # a session may begin here (communities_to_summarize): the file opens on first use
        build_mark = self.kb.store.community_build(namespace)
        # Read again after a build, a report or a write of this process that may have removed entities (members).
        key = (build_mark.built_at if build_mark else None, self._version, self.keeper.removals)
        held = self._catalog.get(namespace)
        if held is None or held[0] != key:
            found = [c for c in self.kb.store.communities(namespace) if c.members]
            held = (key, found, -1, {c.id: c for c in found})
        writes = self.keeper.writes
        if held[2] != writes:  # any write may have deleted facts, passages, observations: checked in memory
            drop_deleted(self.kb.store, held[1])
            held = (key, held[1], writes, held[3])
        self._catalog[namespace] = held
        return build_mark, held[1], held[3]

    def listing(self, namespace: str) -> tuple[CommunityBuild | None, list[CommunityRecord]]:
        """The namespace's last build and its communities, coarse to fine (the web UI's list), their reports as
        stored: `reports` gives them as they are shown."""
        return self._catalog_of(namespace)

    def reports(self, build_mark: CommunityBuild | None, communities: Sequence[CommunityRecord]
                ) -> list[CommunityReport]:
        """The reports of `communities` (of `build_mark`, as `listing` gives them) as global_search shows them: an
        extractive one as the graph is now (`_as_now`), a written one as written, stale when an entity it names
        changed since the build. The web UI's, so that its pages never say what global_search no longer says."""
        if build_mark is None or not communities:
            return []
        current = self._as_now(build_mark.namespace, build_mark)
        changed = self._changed_entities(build_mark, [c for c in communities if c.author != "extractive"])
        return [ranking.as_report(current(c), changed=changed.get(c.id, ())) for c in communities]

    def freshness(self, namespace: str, build: CommunityBuild | None = None) -> CommunityFreshness | None:
        from duckgraph.core.domain.model import CommunityFreshness

        found: Freshness | None = self.keeper.freshness(namespace, build)
        if found is None:
            return None
        return CommunityFreshness(built_at=iso_utc(found.built_at), changed_share=found.changed_share,
                                  stale=found.stale, rebuilding=found.rebuilding)

    # -- global search ---------------------------------------------------------------------------------------

    def global_search(self, query: str, namespace: str, *, level: int | None = None,
                      token_budget: int = 2_000) -> GlobalSearchResult:
        from duckgraph.core.domain.model import GlobalSearchResult

        query = query.strip()
        if not query:
            raise InvalidInputError("the query is empty: ask a question or name a theme")
        self.kb.prepare_write()  # binds the file's embedder, refusing another, as search does
        build_mark, found = self._catalog_of(namespace)
        if not found:
            why = self._why_none(namespace, build_mark)
            return GlobalSearchResult(query=query, level=None, levels=0, reports=[], text=why, truncated=False,
                                      hint=why, freshness=self.freshness(namespace, build_mark))
        current = self._as_now(namespace, build_mark)
        levels = sorted({c.level for c in found})
        if level is not None and level not in levels:
            raise InvalidInputError(f"level {level} does not exist: this namespace has levels 0 to {levels[-1]}")
        vector = self.kb.embedder.embed_query(query)
        # The vector reads the whole question; the words match its topic only.
        similarity, keyword = self.kb.store.search_reports(namespace, vector, ranking.topical(query),
                                                           [c.id for c in found])
        keyword = self._naming_members(query, namespace, found, keyword)
        level = ranking.choose_level(found, token_budget, set(keyword), current) if level is None else level
        specific = ranking.is_specific(query, keyword)
        ranked = ranking.rank(level_view(found, level), similarity, keyword, specific)
        freshness = self.freshness(namespace, build_mark)
        # An extractive report is shown as the graph is now (`_as_now`): only written ones may be behind it.
        changed = self._changed_entities(build_mark, [c for c, _ in ranked if c.author != "extractive"])
        hint = ranking.RECENT_CHANGES if ranking.asks_what_changed(query) else None
        # Stale reports are said to be out of date as a whole; else which entities no report holds yet.
        unreported = "" if freshness is not None and freshness.stale else self._unreported_note(namespace, build_mark)
        closing = "\n".join(filter(None, (hint, _freshness_note(freshness, changed, ranked), unreported)))
        kept, text, truncated = ranking.within_budget(
            ranked, token_budget, changed=changed, closing=closing,
            order="most relevant" if specific else "largest", current=current)
        return GlobalSearchResult(
            query=query, level=level, levels=len(levels), text=text, truncated=truncated,
            reports=[ranking.as_report(c, score, changed.get(c.id, ())) for c, score in kept], freshness=freshness,
            hint=hint)

    def _why_none(self, namespace: str, build_mark: CommunityBuild | None) -> str:
        """What global_search says when there is no community to rank: a namespace that never held anything (a
        misspelt one) is empty, as search says it, not to be built (building it would find nothing); one of
        documents alone has no entity to group, and says how to get them; else before the first build how to build,
        after one that found no relation that none was found or, when relations were stored since, that a build of
        them is under way or to be asked for; after a build whose entities were all deleted since that none is
        left."""
        if build_mark is not None and build_mark.nodes:
            return NONE_LEFT
        if namespace not in self.kb.store.namespaces():
            return EMPTY_NAMESPACE.format(namespace=namespace)
        stats = self.kb.store.stats(namespace)
        if stats["documents"] and not stats["nodes"]:
            return NO_ENTITIES
        if build_mark is None:
            return NO_COMMUNITIES
        if not stats["edges"]:
            return NO_RELATIONS
        return BUILD_PENDING if self.keeper.pending(namespace, build_mark) else BUILD_DUE

    def _unreported_note(self, namespace: str, build_mark: CommunityBuild) -> str:
        """The closing line on the entities written or linked since the build that no report holds (see
        freshness.Unreported), "" when there are none."""
        found = self.keeper.unreported(namespace, build_mark)
        if not found.ids:
            return ""
        named = [f", e.g. {one_line(node.name)}" for node in self.kb.store.get_nodes([found.example])]
        count = len(found.ids)
        then = ("a rebuild that includes them is under way: ask again in a moment"
                if self.keeper.pending(namespace, build_mark)
                else "build_communities includes them, and search finds them meanwhile")
        return UNREPORTED.format(count=f"{count} entit{'ies' if count > 1 else 'y'}", are="are" if count > 1 else "is",
                                 example="".join(named), then=then)

    def _as_now(self, namespace: str, build_mark: CommunityBuild) -> Callable[[CommunityRecord], CommunityRecord]:
        """What global_search shows of a community: a written report as stored; an extractive one whose members
        changed since the build (a description, a fact ended or deleted, a member deleted; every one when too
        much changed to tell which) written again as the graph is now (`reports.as_now`): it costs no model call,
        so it never says what no longer holds (the web UI and the material of communities_to_summarize too: see
        `reports`, `_next_waiting`). Only for the reports a search renders, a page or a listing shows (a few dozen
        or a hundred, whatever the graph's size), each once until the next write, build or report, or a relation's
        planned start or end passing (`Keeper.key`)."""
        key = (self._version, self.keeper.removals, self.keeper.key(namespace, build_mark))
        held = self._current.get(namespace)
        if held is None or held[0] != key:
            held = self._current[namespace] = (key, self.keeper.touched(namespace, build_mark), {})
        _, touched, shown = held

        def current(community: CommunityRecord) -> CommunityRecord:
            found = shown.get(community.id)
            if found is None:
                due = community.author == "extractive" and (
                    touched is None or ranking.withheld(community) or not touched.keys().isdisjoint(community.members))
                found = shown[community.id] = as_now(self.kb.store, community, now_utc()) if due else community
            return found

        return current

    def _naming_members(self, query: str, namespace: str, found: Sequence[CommunityRecord],
                        keyword: dict[int, float]) -> dict[int, float]:
        """The keyword channel, with the communities holding an entity the query names, first: a report names only
        its central entities, and a question about a minor one ("Summarise everything about Adyen") is about its
        community as much as one naming a word of the report."""
        named = {node.id for node in self.kb.store.find_nodes(namespace, name_candidates(query))}
        if not named:
            return keyword
        top = max(keyword.values(), default=0.0) + 1.0
        return keyword | {c.id: top + keyword.get(c.id, 0.0) for c in found if not named.isdisjoint(c.members)}

    def _changed_entities(self, build_mark: CommunityBuild | None, view: Sequence[CommunityRecord]
                          ) -> dict[int, list[str]]:
        """Community id -> the entities its report names that changed since the build (a new description, a fact
        ended): the report may say what no longer holds."""
        touched = self.keeper.touched(build_mark.namespace, build_mark) if build_mark is not None else None
        if not touched:
            return {}
        return {c.id: names for c in view if (names := touches(c, touched))}

    # -- reports written by the host or a model ------------------------------------------------------------------

    def to_write(self, namespace: str, *, level: int | None = None, limit: int = 10) -> ReportsToWrite:
        """Communities whose report is extractive or stale, coarsest and largest first, with their material."""
        from duckgraph.core.domain.model import ReportsToWrite, ReportToWrite

        waiting, count = self._next_waiting(namespace, level, limit)
        return ReportsToWrite(namespace=namespace, remaining=max(0, count - limit), communities=[
            ReportToWrite(id=c.id, level=c.level, size=len(c.members), stale=c.stale, current_title=c.title,
                          material=material(c)) for c in waiting])

    def _waiting(self, namespace: str, level: int | None) -> list[CommunityRecord]:
        """Communities whose report is extractive or stale, coarsest and largest first: stale as global_search
        shows it, so a written report an entity of which changed since it was written is listed (else it would
        stay "(stale)" with nothing asking for it again)."""
        build_mark, found = self._catalog_of(namespace)
        found = [c for c in found if level is None or c.level == level]
        changed = self._changed_entities(build_mark, [c for c in found if c.author != "extractive" and not c.stale])
        return [c for c in found if c.author == "extractive" or c.stale or c.id in changed]

    def _next_waiting(self, namespace: str, level: int | None, limit: int) -> tuple[list[CommunityRecord], int]:
        """The first `limit` of `_waiting`, an extractive report as global_search shows it (its title and material
        as the graph is now, `_as_now`: its author writes from what holds now), a stale written one marked stale,
        its title as written, its material as the graph is now; and how many wait in all. Only those are written
        again: past 5,000 changes every extractive report would be."""
        import dataclasses

        build_mark = self._catalog_of(namespace)[0]
        waiting = self._waiting(namespace, level)
        if not waiting:
            return [], 0
        current = self._as_now(namespace, build_mark)
        moment = now_utc()
        # A withheld title (members or facts deleted since) may name what was deleted: the title global_search shows.
        return [current(c) if c.author == "extractive" else dataclasses.replace(
            c, title=ranking.shown(c)[0], details=as_now(self.kb.store, c, moment).details, stale=True)
            for c in waiting[:limit]], len(waiting)

    def save_host_report(self, namespace: str, community_id: int, title: str, summary: str) -> ReportsWritten:
        """save_community_report: store the host's report, and say how many communities still wait for one."""
        from duckgraph.core.domain.model import ReportsWritten

        self.save_written(namespace, community_id, title, summary)
        return ReportsWritten(namespace=namespace, written=1, remaining=len(self._waiting(namespace, None)))

    def save_written(self, namespace: str, community_id: int, title: str, summary: str, *,
                     author: str = "host") -> CommunityRecord:
        """Store a report written for community `community_id` of the namespace (title and summary)."""
        title, summary = " ".join(title.split()), summary.strip()
        if not title or not summary:
            raise InvalidInputError("a report needs a title and a summary, both not empty")
        if len(title) > MAX_TITLE_CHARS or len(summary) > MAX_SUMMARY_CHARS:
            raise InvalidInputError(f"keep the title under {MAX_TITLE_CHARS} characters and the summary under "
                                    f"{MAX_SUMMARY_CHARS}")
        known = {c.id: c for c in self._communities(namespace)}
        if community_id not in known:
            raise NotFoundError(f"no community {community_id} in namespace {namespace!r}: it may have been rebuilt; "
                                "list them again with communities_to_summarize")
        community = known[community_id]
        written = CommunityRecord(namespace=namespace, level=community.level, members=community.members,
                                  id=community.id, title=title, summary=summary, author=author, stale=False,
                                  # Its key entities and facts as its material gave them: the graph as it is now.
                                  details=as_now(self.kb.store, community, now_utc()).details)
        written.embedding = self.kb.embedder.embed_documents([report_text(written)])[0]
        with self._build_lock, self.kb.writing() as writer:  # a rebuild in flight would drop it
            # Its entities' changes up to now are in the text (its material was as now): only later ones make it
            # stale (freshness.touches), and only observations deleted later withhold it (freshness.drop_deleted).
            # Taken under the write lock: no write commits between them and the report.
            written.details = {**written.details, WRITTEN_AT: now_utc().isoformat(),
                               OBSERVED: observed(self.kb.store, written.details)}
            writer.save_reports([written])
        self._changed()
        return written

    def restore_written(self, namespace: str, written: Sequence[CommunityRecord]) -> int:
        """Put reports written for an earlier build (an imported file's) on this build's communities, as a rebuild
        keeps them: on the community with the same level and members as it was, else (stale) on one that shares
        half its members. Returns how many found a community."""
        current = self._communities(namespace)
        targets = [CommunityRecord(namespace=namespace, level=c.level, members=c.members, id=c.id) for c in current]
        reuse_reports(targets, written)
        details = {c.id: _as_stored(c) for c in current}
        placed = [t for t in targets if t.author != "extractive"]
        for target in placed:
            # The build's entities and facts (the report's own are not carried), their observations now.
            target.details = {**details[target.id], OBSERVED: observed(self.kb.store, details[target.id])}
        if not placed:
            return 0
        for target, vector in zip(placed, self.kb.embedder.embed_documents([report_text(t) for t in placed])):
            target.embedding = vector
        with self._build_lock, self.kb.writing() as writer:
            writer.save_reports(placed)
        self._changed()
        return len(placed)

    def write_with_model(self, namespace: str, *, limit: int = 20, progress: Progress | None = None
                         ) -> ReportsWritten:
        """Have the configured extractor's model write the reports still extractive or stale (see write_reports)."""
        extractor = self.kb.extractor
        if extractor is None:
            raise InvalidInputError("no extractor model is configured ([extractor] in the config, e.g. use = "
                                    "\"ollama\"): configure one, or have an MCP host write the reports with "
                                    "communities_to_summarize and save_community_report, tools a server lists only "
                                    "with DUCKGRAPH_TOOLS=all (tools = \"all\" in the config file; "
                                    "docs/communities.md)")
        return self.write_reports(namespace, extractor, author="model", limit=limit, progress=progress)

    def write_reports(self, namespace: str, writer: Extractor, *, author: str, limit: int = 20,
                      progress: Progress | None = None) -> ReportsWritten:
        """Have `writer` write the reports still extractive or stale (coarsest and largest first, at most `limit`),
        stored with `author`; a community whose report fails is named in `failed`."""
        from duckgraph.core.domain.model import ReportsWritten

        waiting = self._next_waiting(namespace, None, limit)[0]
        written, failed = 0, []
        for done, community in enumerate(waiting):
            try:
                report = writer.write_report(material(community))
                self.save_written(namespace, community.id, report["title"], report["summary"], author=author)
                written += 1
            except (ExtractionError, InvalidInputError) as exc:
                failed.append(f"community {community.id}: {exc}")
            if progress is not None:
                progress(done + 1, len(waiting), f"community {community.id}")
        return ReportsWritten(namespace=namespace, written=written, failed=failed,
                              remaining=len(self._waiting(namespace, None)))

    # -- what search says --------------------------------------------------------------------------------------

    def about_anchors(self, namespace: str, anchors: Sequence[ScoredNode], query: str, nothing_relevant: bool
                      ) -> tuple[dict[int, str], str | None]:
        """The finest community title of each anchor, and the hint that global_search exists when the question
        seems to be about the memory as a whole while communities exist: nothing is relevant, or its best anchors
        (those at least `NEAR_BEST` as relevant as the best) are spread over several top-level communities and it
        names none of its anchors. A question that names an entity is about it, and the weaker anchors of a
        pointed question fall anywhere ("Who is on call for the Payments Team right now?"). A title is the one
        global_search shows (`_shown_titles`)."""
        try:
            if not self._communities(namespace):  # no report to answer from: global_search would say why
                return {}, None
            found = self.kb.store.node_communities([a.id for a in anchors], namespace)
            shown = self._shown_titles(namespace, {chain[-1][0] for chain in found.values() if chain})
        except StoreError:  # a store without communities: search answers as before
            return {}, None
        titles = {node: f"{shown[chain[-1][0]]} (community {chain[-1][0]})" for node, chain in found.items()
                  if chain and chain[-1][0] in shown}
        best = max((a.score for a in anchors), default=0.0)
        tops = [found[a.id][0][0] for a in anchors if a.score >= NEAR_BEST * best and found.get(a.id)]
        named = name_candidates(query)
        spread = (len(set(tops)) >= SPREAD_COMMUNITIES and max(map(tops.count, tops)) * 2 <= len(tops)
                  and not any(entity_key(a.name) in named for a in anchors))
        return titles, BROAD_IF_NOTHING if nothing_relevant else BROAD_HINT if spread else None

    def _shown_titles(self, namespace: str, ids: set[int]) -> dict[int, str]:
        """Community id -> its title as global_search shows it (`_as_now`, `global_search.shown`), of those of `ids`
        still listed: an extractive one's as the graph is now, a withheld one's of its key entities still members.
        So search never names a community by a title global_search holds back (`ranking.withheld`). From the
        catalog global_search reads (once per build or removal; the keeper reads it after writes), not from the
        store: reading the anchors' communities at each search would cost more than the rest of it."""
        build_mark, _, by_id = self._held_catalog(namespace)
        if build_mark is None:
            return {}
        current = self._as_now(namespace, build_mark)
        return {c.id: ranking.shown(current(c))[0] for c in (by_id[i] for i in ids if i in by_id)}

    # -- export ----------------------------------------------------------------------------------------------------

    def written_reports(self, namespace: str) -> list[CommunityRecord]:
        """The namespace's reports a model or the host wrote, as global_search shows them, for an export: stale when
        it marks them so (an entity they name changed since), and without those it withholds (`ranking.withheld`:
        their text may state what was deleted, and an import would show it again)."""
        import dataclasses

        build_mark, found = self._catalog_of(namespace)
        written = [c for c in found if c.author != "extractive" and not ranking.withheld(c)]
        changed = self._changed_entities(build_mark, written)
        return [dataclasses.replace(c, stale=c.stale or c.id in changed) for c in written]


def _as_stored(community: CommunityRecord) -> dict[str, Any]:
    """The details a report written now is stored with: those of its community as read, what was deleted left
    out, without the counts of it (the new text was written without it)."""
    return without_deleted_counts(community.details)


def _freshness_note(freshness: CommunityFreshness | None, changed: dict[int, list[str]],
                    ranked: Sequence[tuple[CommunityRecord, float]]) -> str:
    """The text's closing line on how current the reports are: when more changed since the build than a rebuild
    waits for, when it was built, how much changed and whether a rebuild runs; else which entities the reports
    shown name changed since (their facts are current in `search`); "" when the reports are current."""
    if freshness is not None and freshness.stale:
        then = freshness.built_at[:16].replace("T", " ")
        now = ("a rebuild is under way: ask again in a moment for current reports" if freshness.rebuilding
               else "they may be out of date: a running server rebuilds them once writes settle, "
                    "build_communities does it now")
        return (f"(These reports were built {then} UTC; {freshness.changed_share:.0%} of the graph changed since, so "
                f"{now}.)")
    names = sorted({name for community, _ in ranked for name in changed.get(community.id, ())})
    if not names:
        return ""
    shown = ", ".join(names[:CHANGED_NAMED]) + (f" and {len(names) - CHANGED_NAMED} more"
                                                if len(names) > CHANGED_NAMED else "")
    return (f"(Changed since the reports were built: {shown}. Reports marked stale may say what no longer "
            "holds; search gives their current facts.)")
