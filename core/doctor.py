"""`duckgraph doctor`: whether this installation and its file work as configured, and what to do when not.

Everything is tried for real, the way a server would: every plugin is loaded and each of its hooks called, the
embedder is built and embeds a probe (reaching Ollama when it is the embedder), the extractor reaches its model,
and the database is read through the store (or the duckgraph server that owns it). A missing database is
reported, never created. Problems (something does not work) make the command exit 1; warnings (it works, degraded)
are shown only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pluggy

from duckgraph.core import __version__
from duckgraph.core.config import Settings, unknown_variables, unused_settings
from duckgraph.core.files.folder import SUFFIXES as TEXT_SUFFIXES
from duckgraph.core.plugin_manager import PluginKind, create, embedder_mismatch, plugin_problems, registered_ids
from duckgraph.core.terminal import for_stream
from duckgraph.ports import DuckgraphError, Embedder
from duckgraph.ports.http import redact_urls

PROBE_QUERY = "Who maintains the duckgraph doctor's probe?"
#: A few texts embedded as one batch, the way a write embeds them (a query alone may take another path).
PROBE_BATCH = tuple(f"Probe passage {i}: the doctor checks that writes can be embedded." for i in range(8))
#: Free blocks worth a compact copy: this share of the file at least, and this much space. (DuckDB counts fewer
#: free blocks than a copy gives back: a file grown by 35 re-ingests of a changed note, 19.4 MB with 47% of its
#: blocks free, was 3.2 MB once copied, so the share asked for is below half.)
COMPACT_FREE_SHARE = 0.4
COMPACT_FREE_BYTES = 64 * 2**20
#: Groups of likely duplicate entities the report lists, each with the call that merges it (the rest are counted).
DUPLICATES_LISTED = 5
#: Entities read per page while looking for likely duplicates (names, types and ids only are kept).
DUPLICATES_PAGE = 5_000
#: Entities compared at most while looking for likely duplicates (about 50 µs each to read: some 10 s), so that
#: doctor stays quick on a huge file; past it the check says that it compared the first ones only.
DUPLICATES_SCANNED = 200_000
#: Entities whose aliases an older name rule merged (`_check_aliases_apart`) listed with their call (the rest counted).
ALIASES_APART_LISTED = 5


class Diagnosis:
    """The report being built: facts, plus problems (broken, with the fix) and warnings (degraded)."""

    def __init__(self, settings: Settings, pm: pluggy.PluginManager) -> None:
        from duckgraph.core.mcp import tool_listing  # reads a small JSON file; imports no MCP

        self.settings = settings
        self.pm = pm
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.report: dict[str, Any] = {
            "duckgraph": __version__,
            "python": sys.version.split()[0],
            "settings": {"db": str(settings.db), "embedder": settings.embedder.model_dump(),
                         "store": settings.store.model_dump(),
                         "community_detector": settings.community_detector.model_dump()},
            "plugins": sorted(name for name, _ in pm.list_name_plugin()),
            # What `use` (DUCKGRAPH_EMBEDDER, ...) takes: the ids the plugins register, not their entry-point names.
            "plugin_ids": registered_ids(pm),
            "tools_list": tool_listing.status(),
            "namespace": namespace_choice(settings),
            "checks": [],
        }

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.report["checks"].append({"check": name, "ok": ok, "detail": detail})

    def build(self, kind: PluginKind, use: str, options: dict[str, Any], *args: Any) -> Any:
        """The adapter from its plugin, or None with a problem saying why it cannot be built."""
        try:
            return create(self.pm, kind, use, *args, **options)
        except DuckgraphError as exc:
            problem = f"the {kind} {use!r} cannot be created: {exc}"
        except ImportError as exc:  # a plugin importing an optional package on construction
            problem = (f"the {kind} {use!r} cannot be created: {exc}; install what it needs "
                       "(for the built-in ones: pip install 'duckgraph[local]')")
        except Exception as exc:  # a third-party plugin's own failure: still a diagnosis, not a traceback
            problem = f"the {kind} {use!r} cannot be created: {type(exc).__name__}: {exc}"
        self.problems.append(problem)
        self.check(kind, False, problem)
        return None


def namespace_choice(settings: Settings) -> dict[str, Any]:
    """Which namespace a server's calls that name none use, and why."""
    if settings.from_roots:
        return {"default": settings.namespace_fallback, "from_roots": True,
                "why": "namespace is @roots: each client's first MCP root folder's name; a client without roots "
                       f"gets {settings.namespace_fallback!r} (namespace_fallback, DUCKGRAPH_NAMESPACE_FALLBACK)"}
    return {"default": settings.namespace, "from_roots": False,
            "why": "the namespace setting (--namespace, DUCKGRAPH_NAMESPACE or the config file; 'default' when "
                   "unset); a tool call may name another"}


def diagnose(settings: Settings, pm: pluggy.PluginManager) -> dict[str, Any]:
    """The doctor's report (JSON-ready); `report["problems"]` is empty when everything works."""
    diagnosis = Diagnosis(settings, pm)
    _check_environment(diagnosis)
    _check_plugins(diagnosis)
    _check_converters(diagnosis)
    embedder = _check_embedder(diagnosis)
    _check_extractor(diagnosis)
    _check_community_detector(diagnosis)
    _check_database(diagnosis, embedder)
    diagnosis.report["problems"], diagnosis.report["warnings"] = diagnosis.problems, diagnosis.warnings
    return _redacted(diagnosis.report)


def _redacted(value: Any) -> Any:
    """The report without the credentials of any URL in it (a base_url option, a plugin's message quoting one):
    users paste it into issues."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    return value


def _check_environment(diagnosis: Diagnosis) -> None:
    """A DUCKGRAPH_* variable that is no setting (a typo) is ignored by the settings: a warning, with the setting
    it resembles. The check is listed only when there is one."""
    if unknown := unknown_variables():
        diagnosis.warnings.extend(unknown)
        diagnosis.check("environment", False, f"{len(unknown)} DUCKGRAPH_* variable(s) ignored, below")
    diagnosis.warnings.extend(unused_settings(diagnosis.settings))  # set, but without effect (namespace_fallback)


# -- the plugins -------------------------------------------------------------------------------------------


def _check_plugins(diagnosis: Diagnosis) -> None:
    """A plugin that failed to load, a hook never called or that raises, a name or id claimed twice: each is left
    out (the other plugins work) and is a problem here, naming the plugin and its package."""
    problems = plugin_problems(diagnosis.pm)  # complete: registered_ids has called every hook
    diagnosis.problems.extend(problems)
    diagnosis.check("plugins", not problems, f"{len(problems)} plugin problem(s), below" if problems else
                    f"{len(diagnosis.report['plugins'])} plugins loaded, each hook known and callable")


def _check_converters(diagnosis: Diagnosis) -> None:
    """Which converter reads each suffix, and the converters that cannot be used or clash (the files they would
    read are skipped with that reason)."""
    from duckgraph.core.files.converters import converter_overview

    readers, problems = converter_overview(diagnosis.pm)
    diagnosis.report["converters"] = readers
    diagnosis.problems.extend(problems)
    diagnosis.check("converters", not problems, f"{len(problems)} converter problem(s), below" if problems else
                    f"{len(readers)} file suffixes read")


# -- the embedder ------------------------------------------------------------------------------------------


def _check_embedder(diagnosis: Diagnosis) -> Embedder | None:
    configured = diagnosis.settings.embedder
    embedder = diagnosis.build("embedder", configured.use, configured.options)
    if embedder is None:
        diagnosis.report["embedder"] = {"id": f"{configured.use} (not created)"}
        diagnosis.report["relevance_floor"] = None
        return None
    facts: dict[str, Any] = {"id": embedder.id}
    try:
        facts.update(embedder.describe())  # how it will run in a server, before the probe changes that
    except Exception as exc:  # describe() is informative only; the probe below says what is broken
        facts["describe"] = f"not available: {exc}"
    diagnosis.report["embedder"] = facts
    diagnosis.report["relevance_floor"] = relevance_floor(diagnosis.settings.relevance_floor, embedder)
    if diagnosis.report["relevance_floor"] is None:
        diagnosis.warnings.append(
            f"no relevance floor: {embedder.id} has no calibrated one, so search always returns its nearest "
            "content, however unrelated; set relevance_floor (DUCKGRAPH_RELEVANCE_FLOOR), measured with "
            "contrib/bench/locomo.py")
    started = time.perf_counter()
    try:
        embedder.embed_query(PROBE_QUERY)
        embedder.embed_documents(list(PROBE_BATCH))
    except Exception as exc:  # EmbedderError says what to do; anything else is reported as it came
        problem = f"the embedder {embedder.id} cannot embed: {_said(exc)}"
        diagnosis.problems.append(problem)
        diagnosis.check("embedder", False, problem)
        return embedder
    diagnosis.check("embedder", True, f"{embedder.id} embedded a query and a batch of {len(PROBE_BATCH)} "
                                      f"({embedder.dimensions} dimensions) in {time.perf_counter() - started:.1f} s")
    return embedder


def relevance_floor(configured: float | None, embedder: Embedder) -> dict[str, Any] | None:
    """The floor search applies and where it comes from, or None when there is none."""
    if configured is not None:
        return {"value": configured, "from": "the relevance_floor setting"} if configured else None
    if embedder.relevance_floor is not None:
        return {"value": embedder.relevance_floor, "from": f"calibrated for {embedder.id}"}
    return None


# -- the extractor -----------------------------------------------------------------------------------------


def _check_extractor(diagnosis: Diagnosis) -> None:
    configured = diagnosis.settings.extractor
    if configured is None:
        diagnosis.report["extractor"] = None
        return
    extractor = diagnosis.build("extractor", configured.use, configured.options)
    if extractor is None:
        diagnosis.report["extractor"] = {"id": f"{configured.use} (not created)"}
        return
    diagnosis.report["extractor"] = {"id": extractor.id}
    try:
        warning = extractor.check()
    except Exception as exc:
        problem = f"the extractor {extractor.id} cannot extract: {_said(exc)}"
        diagnosis.problems.append(problem)
        diagnosis.check("extractor", False, problem)
    else:
        if warning:  # it works, but may not as configured
            diagnosis.warnings.append(f"the extractor {extractor.id}: {warning}")
        diagnosis.check("extractor", True, f"{extractor.id} is reachable" + ("; see the warning below" if warning
                                                                              else ""))


def _check_community_detector(diagnosis: Diagnosis) -> None:
    configured = diagnosis.settings.community_detector
    detector = diagnosis.build("community_detector", configured.use, configured.options)
    diagnosis.report["community_detector"] = {"id": detector.id if detector is not None
                                              else f"{configured.use} (not created)"}


def _said(exc: BaseException) -> str:
    """A domain error's own words (they carry the fix); the type too for anything else."""
    return str(exc) if isinstance(exc, DuckgraphError) else f"{type(exc).__name__}: {exc}"


# -- the database ------------------------------------------------------------------------------------------


def _check_database(diagnosis: Diagnosis, embedder: Embedder | None) -> None:
    settings, report = diagnosis.settings, diagnosis.report
    path = Path(settings.db).expanduser()
    report["sharing"] = sharing_state(path)
    if report["sharing"].get("problem"):
        diagnosis.problems.append(report["sharing"]["problem"])
    _check_lock_file(diagnosis, path)
    _check_leftovers(diagnosis, path)
    _check_upgrade_copies(diagnosis, path)
    if not path.exists():
        note = f"no database yet at {path}: it is created when first opened"
        report["database"] = {"path": str(path), "exists": False, "note": note}
        blocked = _why_not_creatable(path)
        # The check line says the same as the problem: "ok" above "cannot be created" reads as a contradiction.
        diagnosis.check("database", not blocked, blocked or note)
        if blocked:
            diagnosis.problems.append(blocked)
        return
    report["database"] = {"path": str(path), "exists": True}
    store = _store_health(diagnosis, path)
    if store is None:
        return
    report["store"] = store
    if due := store.get("upgrade"):
        diagnosis.check("database", True, f"{path} read without changing it (schema version {due['from']}, older "
                                          f"than this duckgraph's {due['to']}: see the warning below)")
        diagnosis.warnings.append(
            f"{path} uses schema version {due['from']}: the next duckgraph command that opens it (serve, ingest, "
            f"search, stats, export...; doctor does not) upgrades it to version {due['to']}, after keeping a copy "
            f"of it as it is now: {due['copy']}. The upgrade is one way: a duckgraph that knows only version "
            f"{due['from']} (an older install, another MCP host's) cannot open the file afterwards; point that one "
            "at the copy, or upgrade it too")
    else:
        space = store.get("space")
        diagnosis.check("database", True, f"{path} read (schema version {store.get('schema_version', '?')}"
                                          + (f"; {_space_text(space)})" if space else ")"))
        _store_warnings(diagnosis, store)
        _check_namespace_held(diagnosis, store)
        _check_duplicates(diagnosis, store)
        _check_aliases_apart(diagnosis, store)
        if space:
            _check_space(diagnosis, path, space)
    recorded = store.get("embedder")
    if recorded and embedder is not None and _check_binding(diagnosis, path, recorded, embedder, store):
        # The check line says so too: "ok" above a problem about the file's vectors reads as a contradiction.
        line = next(check for check in reversed(diagnosis.report["checks"]) if check["check"] == "database")
        line.update(ok=False, detail=f"{line['detail']}; its vectors do not fit the configured embedder: see the "
                                     "problem below")


def _check_leftovers(diagnosis: Diagnosis, path: Path) -> None:
    """Files beside the knowledge file that an interruption left: a write-ahead log without its file (DuckDB
    discards it when it creates the next file there), and temporary copies of a backup, restore or compact that was
    killed; and the files a restore or `compact --keep-old` kept aside, which stay until the user deletes them.
    Each warning says what left the file and what to do with it."""
    from duckgraph.core.files.backup import kept_aside, leftover_of, leftovers

    wal = path.with_name(path.name + ".wal")
    if not path.exists() and wal.exists():
        diagnosis.problems.append(
            f"{wal} is a write-ahead log without its file: the next open creates a new file at {path} and DuckDB "
            "discards that log. If the file was moved, put the log beside it (as its name + .wal) first: it holds "
            "the file's last changes; else move it aside")
    by_target: dict[str, list[Path]] = {}
    for leftover in leftovers(path.parent):  # every file's in the folder: a backup's destination may be there too
        by_target.setdefault(leftover_of(leftover), []).append(leftover)
    for name, found in by_target.items():
        target = path.parent / name
        # Only a restore or a compact writes its copy beside the knowledge file under its name; a backup writes
        # beside its destination (a backup onto the knowledge file itself is refused).
        what = (f"a restore or compact of {target} that was interrupted" if name == path.name
                else f"a backup to {target} that was interrupted (or a restore or compact of that file)")
        diagnosis.warnings.append(
            f"{len(found)} temporary files left by {what} ({_megabytes(found)}): {', '.join(map(str, found))}. They "
            f"are unfinished copies, not a memory: delete them (the next backup, restore or compact of {target} "
            "does too)")
    kept: dict[Path, list[Path]] = {}
    labels: dict[Path, str] = {}
    for aside, label in kept_aside(path.parent, path.name):
        base = aside.with_name(aside.name.removesuffix(".wal"))  # a file and its log were kept aside as a pair
        kept.setdefault(base, []).append(aside)
        labels[base] = label
    for base, files in kept.items():
        named = " and ".join(map(str, files))
        if labels[base] == "before-compact":
            diagnosis.warnings.append(
                f"{named} ({_megabytes(files)}) is {path} as it was before a compact, kept by `duckgraph compact "
                f"--keep-old`: open it with --db to read it; delete it once the compacted file works")
        else:
            diagnosis.warnings.append(
                f"{named} ({_megabytes(files)}) is the file that `duckgraph restore` replaced at {path}, kept aside "
                f"with its write-ahead log (if it had one): `--db {base}` opens it with its last writes; delete it "
                "(and its .wal) once the restored file is what you want")


def upgrade_copies(path: Path) -> list[tuple[Path, int]]:
    """The copies the DuckDB store kept of the file `path` before upgrading its schema, beside it, with the schema
    version of each: NAME.schemaN.duckdb (NAME.schemaN-M.duckdb when that name was taken; the file's own suffix
    when it has one), as plugins/duckdb/schema.py's upgrade_copy names them. Matched here by name (the core does
    not import the plugins), for this file only: another file's copies in the same folder are not its."""
    pattern = re.compile(rf"{re.escape(path.stem)}\.schema(?P<version>\d+)(-\d+)?{re.escape(path.suffix or '.duckdb')}")
    try:
        entries = sorted(path.parent.iterdir())
    except OSError:
        return []
    return [(entry, int(found["version"])) for entry in entries
            if (found := pattern.fullmatch(entry.name)) and entry.is_file() and entry != path]


def _check_upgrade_copies(diagnosis: Diagnosis, path: Path) -> None:
    """A copy of the whole file stays beside it after each schema upgrade until the user deletes it: said, with its
    size and date, so that the space it takes is no mystery, with what it is for (going back) and when it can go."""
    for copy, version in upgrade_copies(path):
        wal = copy.with_name(copy.name + ".wal")  # an older duckgraph that used the copy may have left its log
        files = [copy, wal] if wal.exists() else [copy]
        when = datetime.fromtimestamp(copy.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        diagnosis.warnings.append(
            f"{' and '.join(map(str, files))} ({_megabytes(files)}, kept since {when}) is {path} as it was at schema "
            f"version {version}, kept by duckgraph before it upgraded the file: to go back, a duckgraph that knows "
            f"only version {version} (an older install, another MCP host's) opens it with --db {copy} (what was "
            f"written to {path} since is not in it). Delete it once the upgraded file works and no older install "
            "uses it")


def _megabytes(files: list[Path]) -> str:
    return f"{sum(p.stat().st_size for p in files if p.exists()) / 2**20:.1f} MB"


def _space_text(space: dict[str, Any]) -> str:
    total, free = space["total_blocks"], space["free_blocks"]
    # A server folds its writes into the file once they pause; until then they are only in the log.
    wal = space.get("wal_bytes")
    return (f"{space['bytes'] / 2**20:.1f} MiB, {free} of {total} blocks free"
            + (f" ({free / total:.0%})" if total else "")
            + (f"; {wal / 2**20:.1f} MiB of writes in its write-ahead log (.wal), not yet in the file" if wal else ""))


def _check_space(diagnosis: Diagnosis, path: Path, space: dict[str, Any]) -> None:
    """A file mostly of free blocks (rows deleted or replaced: DuckDB reuses the blocks, never gives them back):
    a warning with the way to a compact file."""
    free = space["free_blocks"] * space["block_size"]
    if not space["total_blocks"] or free < COMPACT_FREE_BYTES or (
            space["free_blocks"] / space["total_blocks"] < COMPACT_FREE_SHARE):
        return
    diagnosis.warnings.append(
        f"{path} is {space['bytes'] / 2**20:.0f} MiB, {free / 2**20:.0f} MiB of it free blocks left by deleted or "
        "replaced rows (DuckDB reuses them for later writes, but the file never shrinks). To compact it, stop the "
        f"servers that use it, then: duckgraph compact --db {path}")


def _store_health(diagnosis: Diagnosis, path: Path) -> dict[str, Any] | None:
    """The store's health, asked of the duckgraph server that owns the file when one does (this process cannot
    open it then), else read by opening the file here. A file of an older schema is not opened: opening it would
    upgrade it, one way (the store says what the upgrade would do, read without changing the file)."""
    try:
        if diagnosis.report["sharing"].get("owner_pid"):
            from duckgraph.core.sharing import call_owner

            return call_owner(path, "health")
        if diagnosis.report["sharing"].get("other_version"):  # it holds the file, and answers this version nothing
            diagnosis.check("database", False, "not read: the duckgraph server that owns it runs another version "
                                               "(see the problem below)")
            return None
        configured = diagnosis.settings.store
        store = diagnosis.build("store", configured.use, configured.options, path)
        if store is None:
            return None
        # Only a store that upgrades files at open has it (a plugin's may not): asked before the open, which upgrades.
        upgrade = getattr(store, "schema_upgrade", None)
        if callable(upgrade) and (due := upgrade()):
            return {"schema_version": due["from"], "embedder": due["embedder"], "upgrade": due}
        store.open()
        try:
            health = store.health()
            groups, scanned, complete = likely_duplicates(store)
            apart = [g for g in groups if g.get("types_differ")]
            groups = [g for g in groups if not g.get("types_differ")]
            health["duplicates"] = {"groups": len(groups), "entities": sum(len(g["names"]) for g in groups),
                                    "first": groups[:DUPLICATES_LISTED], "scanned": scanned, "complete": complete,
                                    "types_differ": {"groups": len(apart), "first": apart[:DUPLICATES_LISTED]}}
            return health
        finally:
            store.close()
    except DuckgraphError as exc:
        diagnosis.problems.append(str(exc))
        diagnosis.check("database", False, str(exc))
        return None


def _store_warnings(diagnosis: Diagnosis, store: dict[str, Any]) -> None:
    degraded = {kind: mode for kind, mode in store.get("vector_search", {}).items() if "vss unavailable" in mode}
    if degraded:  # only the opt-in vss HNSW path needs vss; the default IVF index does not
        diagnosis.warnings.append(f"vss is not loaded ({store['vss']['problem']}): {', '.join(degraded)} vector "
                                  "search uses an exact scan")
    if store.get("read_only"):
        diagnosis.warnings.append(f"the file is read-only ({store['read_only']}): searches work, writes are refused")


def _check_namespace_held(diagnosis: Diagnosis, store: dict[str, Any]) -> None:
    """A configured namespace that holds nothing while others hold the memory: a server started with these settings
    answers every question "nothing relevant is stored", which reads like a memory that forgot everything."""
    from duckgraph.core.domain.namespaces import namespace_hint

    held, choice = store.get("namespaces"), diagnosis.report["namespace"]
    if not held or choice["from_roots"] or choice["default"] in held:
        return
    diagnosis.warnings.append(
        f"the namespace {choice['default']!r}, where calls that name no namespace read and write, holds nothing, "
        f"while the file holds others: {namespace_hint(choice['default'], held)}. Set the one you meant "
        "(--namespace, DUCKGRAPH_NAMESPACE or the config file)")


def likely_duplicates(store: Any, limit: int | None = None) -> tuple[list[dict[str, Any]], int, bool]:
    """Groups of entities of one namespace whose names are one but for case, accents, punctuation, spacing and
    markdown emphasis around the name, or look the same but use letters of other scripts (one `resolution.skeleton`
    of the `resolution.unemphasised` name, spaces left out: "OrdersDB", "orders_db" and "orders-db"; "Alice" and
    "**Alice**"; "Maya Chen" and a Maya Chen written with a Cyrillic a), or one of which has
    another's name (so written) as an alias: renamed in one memory, the old name kept as an alias, and imported
    into another that still has an entity of the old name. Entities named as the user ("me", "User":
    `resolution.is_self_reference`) are one group with the one that says it is the user (`says_it_is_the_user`), its
    target, whatever their types.
    Entities named alike but of different known types ("Jordan" a Country, "Jordan Lee" a Person whose alias is
    "Jordan") are likely different things of one name: no merge is offered for them. Such a group is listed apart
    ("types_differ": true, "types": each name's), and its entities of one type, two or more, are a group of their
    own (one of type 'unknown', which says nothing of what it is, joins the group only where one type is known).
    One pass over the entities, a page at a time, keeping each one's name, type and id: no vector is compared
    (near vectors, "K8s" and "Kubernetes", are what `possible_duplicates` reports when such an entity is written).
    Each group: {"namespace", "names" (the first stored first), "types", "target", "sources", "reasons"}; with how
    many entities were compared, and whether that was all of them (at most `limit`, the first stored first;
    default `DUPLICATES_SCANNED`)."""
    from duckgraph.core.domain.resolution import (
        is_self_reference, is_unknown_type, looks_the_same, says_it_is_the_user, skeleton, type_key, unemphasised)
    from duckgraph.ports import loose_key

    limit = DUPLICATES_SCANNED if limit is None else limit

    def shape_of(name: str) -> str:
        return skeleton(unemphasised(name)).replace(" ", "")

    groups: list[dict[str, Any]] = []
    scanned, complete = 0, True
    for namespace in store.namespaces():
        by_shape: dict[str, list[tuple[int, str, str]]] = {}
        aliases: list[tuple[int, str]] = []  # (entity id, shape) of each alias
        selves: list[tuple[int, str, str]] = []  # entities named "me", "User"... then those that say they are the user
        owners: list[tuple[int, str, str]] = []
        offset = 0
        while page := store.list_nodes(namespace, offset=offset, limit=min(DUPLICATES_PAGE, limit - scanned + 1)):
            if scanned + len(page) > limit:
                page, complete = page[:limit - scanned], False
            offset += len(page)
            scanned += len(page)
            for node in page:
                if shape := shape_of(node.name):
                    by_shape.setdefault(shape, []).append((node.id, node.name, node.type))
                aliases.extend((node.id, shape) for alias in node.aliases if (shape := shape_of(alias)))
                if is_self_reference(node.name) or says_it_is_the_user(node):
                    (selves if is_self_reference(node.name) else owners).append((node.id, node.name, node.type))
            if not complete:
                break
        # Entities joined by a shared shape or an alias that is another's name, in groups (union-find by id).
        parent: dict[int, int] = {}

        def root(node_id: int) -> int:
            while parent.get(node_id, node_id) != node_id:
                node_id = parent[node_id]
            return node_id

        entity: dict[int, tuple[str, str]] = {}
        for found in by_shape.values():
            for node_id, name, type_ in found:
                entity[node_id] = (name, type_)
                parent[root(node_id)] = root(found[0][0])
        alias_of: dict[int, list[str]] = {}  # entity id -> the names of others that are its aliases
        for node_id, shape in aliases:
            for other_id, other, _ in by_shape.get(shape, ()):
                if other_id != node_id and other not in alias_of.get(node_id, []):
                    parent[root(other_id)] = root(node_id)
                    alias_of.setdefault(node_id, []).append(other)
        members: dict[int, list[int]] = {}
        for node_id in sorted(entity):
            members.setdefault(root(node_id), []).append(node_id)
        def aliases(ids: list[int]) -> list[str]:
            names = {entity[i][0] for i in ids}
            return [f"{entity[i][0]!r} has {other!r} as an alias" for i in ids for other in alias_of.get(i, [])
                    if other in names]

        # The user written as "me", "I", "User" (resolution.SELF_REFERENCES) and under their name: one group, whatever
        # the types (a relation's end made for "me" is of type 'unknown'), merged into the entity under their name.
        user = [*owners, *selves] if selves and len(owners) + len(selves) > 1 else []
        if user:
            names = [name for _, name, _ in user]
            said = [f"{', '.join(repr(name) for _, name, _ in selves)} stand(s) for the user (English "
                    "self-references)"]
            said += [f"{owners[0][1]!r} says it is the user (its description or an alias)"] if owners else [
                f"give {names[0]!r} the user's name with update_entity once it is known"]
            groups.append({"namespace": namespace, "names": names, "types": sorted({t for _, _, t in user}),
                           "target": names[0], "sources": names[1:], "reasons": said})
        apart = {node_id for node_id, _, _ in user}
        for ids in sorted(members.values()):
            ids = [i for i in ids if i not in apart]
            if len(ids) < 2:
                continue
            by_type: dict[str, list[int]] = {}
            for i in ids:
                if not is_unknown_type(entity[i][1]):
                    by_type.setdefault(type_key(entity[i][1]), []).append(i)
            if len(by_type) > 1:
                groups.append({"namespace": namespace, "names": [entity[i][0] for i in ids],
                               "types": [entity[i][1] for i in ids], "reasons": aliases(ids), "types_differ": True})
            for part in [ids] if len(by_type) <= 1 else [p for p in by_type.values() if len(p) > 1]:
                names = [entity[i][0] for i in part]
                # The target: the first stored of those that have another's name as an alias (the rename's side),
                # else of all; of those, the first written in plain letters and without emphasis (a look-alike, or a
                # name copied with its markdown, is the copy).
                holders = [i for i in part if any(o in names for o in alias_of.get(i, []))] or part
                plain = [name for i in holders if skeleton(name := entity[i][0]) == loose_key(name)
                         and unemphasised(name) == name]
                target = plain[0] if plain else entity[holders[0]][0]
                sources = [name for name in names if name != target]
                reasons = [f"{name!r} is {bare!r} in markdown emphasis" for name in sources
                           if (bare := unemphasised(name)) != name]
                reasons += [looks_the_same(name, target) for name in sources
                            if skeleton(name) != loose_key(name)]
                groups.append({"namespace": namespace, "names": names, "types": sorted({entity[i][1] for i in part}),
                               "target": target, "sources": sources, "reasons": reasons + aliases(part)})
        if not complete:
            break
    return groups, scanned, complete


def _check_duplicates(diagnosis: Diagnosis, store: dict[str, Any]) -> None:
    """Likely duplicate entities (`likely_duplicates`): a warning with their count and the merge call of the first
    few groups, since search and the reads split what the memory holds of one thing between them. Not checked
    through a duckgraph server that owns the file (it answers its health only)."""
    found = store.get("duplicates")
    if found is None:
        diagnosis.check("duplicates", True, "not checked: a duckgraph server has the file open; stop it and run "
                                            "doctor again to look for likely duplicate entities")
        return
    # A huge file: the first entities only were compared (`DUPLICATES_SCANNED`).
    partial = "" if found.get("complete", True) else f" among the first {found['scanned']:,} entities stored"
    apart = _types_differ(found.get("types_differ"))
    if not found["groups"]:
        none = "no likely duplicate entities" if apart else (
            "no two entities of a namespace are named alike but for case, accents, punctuation, spacing or "
            "look-alike letters, nor is one named as another's alias")
        diagnosis.check("duplicates", True, f"{none}{partial}{apart}")
        return
    diagnosis.check("duplicates", True, f"{found['groups']} group(s) of likely duplicate entities "
                                        f"({found['entities']} entities){partial}, below{apart}")
    listed = []
    for group in found["first"]:
        call = (f"merge_entities(sources={json.dumps(group['sources'], ensure_ascii=False)}, "
                f"target={json.dumps(group['target'], ensure_ascii=False)}, "
                f"namespace={json.dumps(group['namespace'], ensure_ascii=False)})")
        why = f" ({'; '.join(group['reasons'])})" if group["reasons"] else ""
        listed.append(f"{', '.join(map(repr, group['names']))} [{', '.join(group['types'])}]{why}: {call}")
    more = found["groups"] - len(found["first"])
    diagnosis.warnings.append(
        f"possible duplicate entities: {found['groups']} group(s) of entities named alike but for case, accents, "
        "punctuation, spacing or look-alike letters of other scripts, or one named as another's alias, each likely "
        "one thing whose facts search and the reads split between them. If they are one, merge each group with the "
        "merge_entities tool (or \"Merge duplicates into this\" on the target's page in `duckgraph ui`); if not, "
        f"rename one with update_entity: {' | '.join(listed)}" + (f"; and {more} more group(s)" if more else ""))


def _types_differ(found: dict[str, Any] | None) -> str:
    """The duplicates check's words for the groups of entities named alike but of different types
    (`likely_duplicates`): likely different things of one name, so listed with their types, no merge offered."""
    if not found or not found["groups"]:
        return ""
    listed = []
    for group in found["first"]:
        named = ", ".join(f"{name!r} [{type_}]" for name, type_ in zip(group["names"], group["types"]))
        why = f" ({'; '.join(group['reasons'])})" if group["reasons"] else ""
        listed.append(f"{named}{why} in namespace {json.dumps(group['namespace'], ensure_ascii=False)}")
    more = found["groups"] - len(found["first"])
    return (f"; {found['groups']} group(s) of entities named alike but of different types, likely different "
            f"things of one name, so not offered as duplicates: {' | '.join(listed)}"
            + (f"; and {more} more group(s)" if more else "")
            + ". If two of them are one thing, give them one type with update_entity, and doctor lists their merge")


def _check_aliases_apart(diagnosis: Diagnosis, store: dict[str, Any]) -> None:
    """Aliases that an older duckgraph's looser name rule joined to their entity, and this one keeps apart ("C++"
    and "C#" were merged into "C"): found when the file's name keys were rebuilt, and listed while their entities
    have them, with the call that removes them. Each may be another thing whose facts are on that entity; not split
    by itself, since an alias may be meant."""
    found = store.get("aliases_apart")
    if found is None:  # a store that does not say (another plugin's)
        return
    if not found:
        diagnosis.check("aliases", True, "no alias that an older duckgraph's name rule joined to its entity and this "
                                         "one keeps apart")
        return
    count = sum(len(entity["apart"]) for entity in found)
    entities = f"{len(found)} entit{'y' if len(found) == 1 else 'ies'}"
    diagnosis.check("aliases", True, f"{count} alias(es) of {entities} that an older duckgraph's name rule joined to "
                                     "them and this one keeps apart, below")
    listed = []
    for entity in found[:ALIASES_APART_LISTED]:
        keep = [alias for alias in entity["aliases"] if alias not in entity["apart"]]
        call = (f"update_entity(name={json.dumps(entity['name'], ensure_ascii=False)}, "
                f"aliases={json.dumps(keep, ensure_ascii=False)}, "
                f"namespace={json.dumps(entity['namespace'], ensure_ascii=False)})")
        listed.append(f"{entity['name']!r} has {', '.join(map(repr, entity['apart']))}: {call}")
    more = len(found) - len(listed)
    diagnosis.warnings.append(
        "aliases merged by an older duckgraph, whose name rule dropped what this one keeps (symbols: 'C++' and 'C#' "
        "were 'C'): each may be another thing, whose observations and relations were stored on the entity that has "
        "it. Where one is, remove the alias with the update_entity call given (or on the entity's page in "
        "`duckgraph ui`), create the other entity (create_entities, add_knowledge_graph) and move its observations "
        "and relations to it; where the alias is meant, keep it (it stays listed here): "
        + " | ".join(listed) + (f"; and {more} more entities" if more else ""))


def _check_binding(diagnosis: Diagnosis, path: Path, recorded: dict[str, Any], embedder: Embedder,
                   store: dict[str, Any]) -> bool:
    """The file's vectors are comparable only with those of the embedder that wrote them: whether they are not."""
    dimensions = None
    if recorded["id"] == embedder.id:
        try:
            dimensions = embedder.dimensions
        except Exception:  # the probe above has already reported why the embedder does not work
            return False
        if dimensions == recorded["dimensions"]:
            return False
    if "vectors" in store and not any(store["vectors"].values()):  # as the store binds such a file again
        diagnosis.warnings.append(
            f"the file records the embedder {recorded['id']!r} ({recorded['dimensions']} dimensions) but holds no "
            f"vectors (a first write that failed after recording it, or everything deleted): the next write records "
            f"the configured {embedder.id!r} instead")
        return False
    diagnosis.problems.append(embedder_mismatch(
        path, (recorded["id"], recorded["dimensions"]), embedder.id, dimensions=dimensions,
        registered=diagnosis.report["plugin_ids"]["embedder"], file="the file"))
    return True


def _why_not_creatable(path: Path) -> str | None:
    """Why the first write could not create the file (a symbolic link to nothing, which the store refuses, or its
    nearest existing folder is not writable), or None."""
    if path.is_symlink():  # `exists` follows the link: one to nothing looks like no file yet
        return (f"{path} cannot be created: it is a symbolic link to {os.readlink(path)}, which leads to no file. "
                "If the memory was moved or its drive is not mounted, mount it or point the link at the memory's "
                f"file; to start a new memory there, give --db (DUCKGRAPH_DB) the target itself, "
                f"{os.path.realpath(path)}")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
        return None
    return (f"{path} cannot be created: {folder} is not a writable folder for this user; choose another file with "
            "--db or DUCKGRAPH_DB")


def _check_lock_file(diagnosis: Diagnosis, path: Path) -> None:
    """A lock file beside the knowledge file that no server can use: another user's (one run as root leaves it,
    mode 0600, which this user cannot even read, so `sharing_state` sees no holder), a symbolic link, or one this
    user cannot write. Every `duckgraph serve` and `duckgraph ui` on the file is refused until it is dealt with."""
    from duckgraph.core import sharing

    problem = sharing.lock_file_problem(path)
    if problem and problem not in diagnosis.problems:  # the owner check above may have said the same
        diagnosis.problems.append(problem)


def sharing_state(db: Path) -> dict[str, Any]:
    """Which duckgraph server (if any) owns the file, how many others use it through that one (core/sharing)."""
    from duckgraph.core import sharing

    if not sharing.supported():
        return {"held": None, "note": "this platform cannot share a file between servers"}
    info = sharing.holder(db)
    if info is None:
        return {"held": False}
    try:
        status = sharing.call_owner(db, "status", wait=10)
    except DuckgraphError as exc:
        return {"held": True, "owner_pid": None, "recorded_pid": info.get("pid"), "problem": str(exc),
                "other_version": isinstance(exc, sharing.OtherVersionError)}
    clients = [pid for pid in status.get("client_pids", []) if pid != os.getpid()]  # not this command
    state = {"held": True, "owner_pid": status.get("pid"), "since": status.get("since"), "client_pids": clients,
             "socket": status.get("socket")}
    from duckgraph.core.mcp import tool_listing

    # An owner that serves other tools answers doctor, but no server of this version: each of their calls fails.
    if other := sharing.version_mismatch(info, {"tools": tool_listing.surface()}):
        state["problem"] = other
    return state


# -- the text report ---------------------------------------------------------------------------------------


def print_report(report: dict[str, Any]) -> None:
    """The report as text on standard output, as its encoding can write it (a path or a problem may hold what
    cp1252 lacks: `for_stream`)."""
    sys.stdout.write(for_stream("\n".join(report_lines(report)) + "\n", sys.stdout))


def report_lines(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    lines.append(f"duckgraph {report['duckgraph']} on Python {report['python']}")
    database = report.get("database", {})
    creatable = all(check["ok"] for check in report["checks"] if check["check"] == "database")
    lines.append(f"database:  {report['settings']['db']}" + (
        "" if database.get("exists", True) else " (no database yet: it is created when first opened)" if creatable
        else " (no database yet, and it cannot be created: see the problem below)"))
    shared = report.get("sharing", {})
    if shared.get("owner_pid"):
        clients = ", ".join(map(str, shared["client_pids"])) or "none"
        lines.append(f"sharing:   owned by the duckgraph server pid {shared['owner_pid']} (since {shared['since']}); "
                     f"servers using it through that one: {clients}; the checks below went through it")
    elif shared.get("other_version"):
        lines.append(f"sharing:   held by duckgraph pid {shared.get('recorded_pid') or '?'}, of another duckgraph "
                     "version: see the problem below")
    elif shared.get("held"):
        lines.append(f"sharing:   held by duckgraph pid {shared.get('recorded_pid') or '?'}, which does not answer")
    elif shared.get("held") is False:
        lines.append("sharing:   no duckgraph server has the file open")
    namespace = report["namespace"]
    lines.append(f"namespace: {'@roots' if namespace['from_roots'] else namespace['default']} ({namespace['why']})")
    lines.append(f"embedder:  {report['embedder']['id']}")
    floor = report["relevance_floor"]
    lines.append(f"relevance floor: {floor['value']} ({floor['from']})" if floor else "relevance floor: none")
    for label, text in report["embedder"].items():
        if label != "id":
            lines.append(f"embedder {label}: {text}")
    if report.get("extractor"):
        lines.append(f"extractor: {report['extractor']['id']}")
    lines.append(f"community detector: {report['community_detector']['id']}")
    lines += _store_lines(report.get("store"))
    lines.append("plugins:   " + ", ".join(report["plugins"]))
    converters = ", ".join(f"{suffix} ({reader})" for suffix, reader in report["converters"].items())
    lines.append(f"converters: {converters}; {', '.join(sorted(TEXT_SUFFIXES))} read as text")
    for kind, ids in report["plugin_ids"].items():  # what `use` takes, and which package registers each id
        lines.append(f"{kind} ids: " + (", ".join(f"{plugin_id} ({owner})" for plugin_id, owner in ids.items())
                                        or "none"))
    lines.append(f"tools/list at start: {report['tools_list']}")
    for check in report["checks"]:
        lines.append(f"check {check['check']}: {'ok, ' if check['ok'] else 'FAILED: '}{check['detail']}")
    for problem in report["problems"]:
        lines.append(f"problem:   {problem}")
    for warning in report["warnings"]:
        lines.append(f"warning:   {warning}")
    if not report["problems"] and not report["warnings"]:
        lines.append("no problems found")
    return lines


def _store_lines(store: dict[str, Any] | None) -> list[str]:
    lines: list[str] = []
    if not store:
        return lines
    recorded = store["embedder"]
    due = store.get("upgrade")
    lines.append(f"schema:    version {store['schema_version']}"
                 + (f" (this duckgraph's is {due['to']}: see the warning below)" if due else ""))
    lines.append(f"built with: {recorded['id']} ({recorded['dimensions']} dimensions)" if recorded
                 else "built with: (no embedder recorded yet)")
    if due:  # the file was not opened: nothing more is known of it
        return lines
    vss = store["vss"]
    lines.append(f"vss:       {'loaded from ' + vss['path'] if vss['loaded'] else 'NOT loaded: ' + vss['problem']}")
    for kind, mode in store["vector_search"].items():
        lines.append(f"{kind} vector search: {mode}")
    lines.append(f"passage texts: {store.get('passage_texts', 'not reported')}")
    lines.append(f"memory limit: {store.get('memory_limit', 'not reported')}")
    lines.append(f"vectors in memory: {store.get('vectors_in_memory', 'not reported')}")
    lines.append(f"vectors in the file: {store.get('vectors_in_file', 'not reported')}")
    lines.append(f"keyword index: {store.get('keyword_index', 'not reported')}")
    return lines
