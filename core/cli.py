"""The `duckgraph` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from duckgraph.core import __version__
from duckgraph.ports import DuckgraphError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except DuckgraphError as exc:
        print(f"duckgraph: {exc}", file=sys.stderr)
        _hint_when_a_server_holds_the_file(args, exc)
        return 1
    except KeyboardInterrupt:
        return 130


def _hint_when_a_server_holds_the_file(args: argparse.Namespace, exc: DuckgraphError) -> None:
    """After a failure to open the file, say so when a duckgraph server holds it (the lock error names a Python)."""
    if args.command == "serve" or "locked" not in str(exc):
        return
    try:
        from duckgraph.core import sharing
        from duckgraph.core.config import load_settings

        info = sharing.holder(load_settings(args.config, db=args.db).db)
    except Exception:  # only a hint: the error above stands on its own
        return
    if info is not None:
        print(f"duckgraph: the file is open in the duckgraph server pid {info.get('pid', '?')} (an MCP client's). "
              "Use it through that client, or stop it; `duckgraph doctor` and `duckgraph backup` work while it "
              "runs.", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duckgraph", description="Local GraphRAG memory for AI agents, over MCP.")
    parser.add_argument("--version", action="version", version=f"duckgraph {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help="database file (default: DUCKGRAPH_DB, the config file, or the user data dir)")
    common.add_argument("--config", help="TOML config file (default: DUCKGRAPH_CONFIG or the user config dir)")
    common.add_argument("--log-level", help="DEBUG, INFO, WARNING (default) or ERROR; logs go to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio, or streamable HTTP)")
    serve.add_argument("--http", action="store_true",
                       help="serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    serve.add_argument("--host", help="address to listen on with --http (default 127.0.0.1; any other than a "
                                      "loopback address needs a token: DUCKGRAPH_HTTP_TOKEN)")
    serve.add_argument("--port", type=int, help="port to listen on with --http (default 8765)")
    serve.set_defaults(run=_serve)

    demo = sub.add_parser("demo", parents=[common], help="load a small sample into a fresh file and search it")
    demo.set_defaults(run=_demo)

    ingest = sub.add_parser("ingest", parents=[common], help="add .txt and .md files or folders as documents")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    extract = ingest.add_mutually_exclusive_group()
    extract.add_argument("--extract", dest="extract", action="store_true", default=None,
                         help="extract entities and relationships (default: when an extractor is configured)")
    extract.add_argument("--no-extract", dest="extract", action="store_false")
    ingest.add_argument("--json", action="store_true", help="print the result of every batch as JSON")
    ingest.set_defaults(run=_ingest)

    search = sub.add_parser("search", parents=[common], help="anchor & expand search")
    search.add_argument("query")
    search.add_argument("--json", action="store_true", help="print the structured result")
    search.add_argument("--hops", type=int)
    search.add_argument("--k-anchors", type=int)
    search.add_argument("--max-nodes", type=int)
    search.add_argument("--max-passages", type=int)
    search.add_argument("--token-budget", type=int, default=2_000)
    search.set_defaults(run=_search)

    stats = sub.add_parser("stats", parents=[common], help="counts of nodes, edges, documents and types")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(run=_stats)

    doctor = sub.add_parser("doctor", parents=[common], help="check the installation and the database")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(run=_doctor)

    export = sub.add_parser("export", parents=[common], help="write the whole knowledge base as JSON Lines")
    export.add_argument("-o", "--output", metavar="FILE", help="file to write (default: standard output)")
    export.add_argument("--embeddings", action="store_true",
                        help="include the vectors (a bigger file; importing it computes no embeddings)")
    export.set_defaults(run=_export)

    imp = sub.add_parser("import", parents=[common],
                         help="read a duckgraph export or a memory server memory.jsonl into the database")
    imp.add_argument("file", metavar="FILE", help="the JSON Lines file ('-' for standard input)")
    imp.add_argument("--re-embed", dest="reembed", action="store_true",
                     help="ignore the vectors in the file and compute them with the configured embedder")
    imp.add_argument("--json", action="store_true", help="print the summary as JSON")
    imp.set_defaults(run=_import)

    backup = sub.add_parser("backup", parents=[common],
                            help="write a consistent copy of the database file (also while a server uses it)")
    backup.add_argument("path", metavar="PATH", help="the file to write; the copy opens directly with --db PATH")
    backup.add_argument("--force", action="store_true", help="replace PATH if it exists")
    backup.add_argument("--json", action="store_true", help="print the result as JSON")
    backup.set_defaults(run=_backup_command)
    return parser


def _setup(args: argparse.Namespace, **overrides: Any):
    from duckgraph.core.bootstrap import bootstrap
    from duckgraph.core.config import load_settings

    settings = load_settings(args.config, db=overrides.pop("db", None) or args.db,
                             log_level=args.log_level, **overrides)
    logging.basicConfig(
        level=settings.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return bootstrap(settings)


def _serve(args: argparse.Namespace) -> int:
    if not args.http and (args.host is not None or args.port is not None):
        print("duckgraph: --host and --port go with --http", file=sys.stderr)
        return 2
    # Settings errors must reach the user before the MCP handshake, not as a crash inside it.
    services = _setup(args)
    if args.http:
        from duckgraph.core.mcp.http import DEFAULT_HOST, DEFAULT_PORT, check_binding, endpoint_url
        from duckgraph.core.mcp.transports import serve_http

        host = DEFAULT_HOST if args.host is None else args.host
        port = DEFAULT_PORT if args.port is None else args.port
        if not 0 <= port <= 65_535:
            print(f"duckgraph: --port {port} is not a port number", file=sys.stderr)
            return 2
        token = services.settings.http_token
        check_binding(host, token.get_secret_value() if token else None)
        print(f"duckgraph: serving MCP at {endpoint_url(host, port)} "
              f"({'bearer token required' if token else 'no token: this machine only'})", file=sys.stderr)
        serve_http(services, host, port)
        return 0
    from duckgraph.core.mcp.transports import serve

    serve(services)
    return 0


INGEST_SUFFIXES = {".txt", ".md", ".markdown"}
INGEST_BATCH = 20


def _ingest(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.model import DocumentInput

    files = _files_to_ingest(args.paths)
    if not files:
        print("duckgraph: no .txt or .md files found in " + ", ".join(args.paths), file=sys.stderr)
        return 1
    services = _setup(args)
    extract = services.knowledge_base.extractor is not None if args.extract is None else args.extract
    stored = chunks = extracted = already = failed = 0
    bar = ProgressBar()
    with services.knowledge_base as kb:
        for start in range(0, len(files), INGEST_BATCH):
            batch = files[start : start + INGEST_BATCH]
            documents = []
            for document_id, path in batch:
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    print(f"\nduckgraph: skipping {path}: {exc}", file=sys.stderr)
                    continue
                if text.strip():
                    documents.append(DocumentInput(id=document_id, title=path.stem, text=text))
            if not documents:
                continue
            bar.label = f"files {start + 1}-{start + len(batch)} of {len(files)}"
            result = kb.add_documents(documents, extract=extract, progress=bar.update)
            stored += sum(not d.unchanged for d in result.documents)
            chunks += result.chunks_written
            extracted += sum(1 for e in result.extractions if not e.error and not e.skipped)
            already += sum(1 for e in result.extractions if e.skipped)
            failed += result.extraction_errors
            for entry in result.extractions:
                if entry.error:
                    print(f"\nduckgraph: extraction failed for {entry.document_id}#{entry.chunk_id}: {entry.error}",
                          file=sys.stderr)
            if args.json:
                print(result.model_dump_json())
    bar.finish()
    summary = f"{stored} documents stored ({len(files) - stored} unchanged or skipped), {chunks} passages"
    if extract:
        summary += f", {extracted} passages extracted" + (f" ({already} had been already)" if already else "")
        summary += f", {failed} failed"
    print(summary, file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0


def _files_to_ingest(paths: list[str]) -> list[tuple[str, Path]]:
    """(document id, file) pairs; the id is the path as given, so re-ingesting a file updates it in place."""
    found: dict[str, Path] = {}
    for argument in paths:
        root = Path(argument).expanduser()
        if root.is_dir():
            for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in INGEST_SUFFIXES):
                found[(root / path.relative_to(root)).as_posix()] = path
        elif root.is_file():
            found[root.as_posix()] = root
        else:
            raise DuckgraphError(f"{argument} does not exist")
    return list(found.items())


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self.label = ""
        self._interactive = sys.stderr.isatty()
        self._last: tuple[str, int] | None = None

    def update(self, done: int, total: int, message: str) -> None:
        filled = self.width * done // max(total, 1)
        line = f"{self.label}: {message} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        if self._interactive:
            print("\r" + line, end="", file=sys.stderr, flush=True)
        elif self._last != (message, 10 * done // max(total, 1)):
            print(line, file=sys.stderr, flush=True)
        self._last = (message, 10 * done // max(total, 1))

    def finish(self) -> None:
        if self._interactive and self._last is not None:
            print(file=sys.stderr)


def _search(args: argparse.Namespace) -> int:
    with _setup(args).knowledge_base as kb:
        result = kb.search(args.query, hops=args.hops, k_anchors=args.k_anchors, max_nodes=args.max_nodes,
                           max_passages=args.max_passages, token_budget=args.token_budget)
    print(result.model_dump_json(indent=2) if args.json else result.text)
    return 0


def _stats(args: argparse.Namespace) -> int:
    with _setup(args).knowledge_base as kb:
        stats = kb.stats()
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(f"{stats['nodes']} nodes, {stats['edges']} edges, {stats['documents']} documents, "
              f"{stats['chunks']} passages")
        for label in ("node_types", "edge_types"):
            if stats[label]:
                print(f"{label.replace('_', ' ')}: " + ", ".join(f"{k} ({v})" for k, v in stats[label].items()))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from duckgraph.core.mcp import tool_listing

    services = _setup(args)
    kb = services.knowledge_base
    report: dict[str, Any] = {
        "duckgraph": __version__,
        "python": sys.version.split()[0],
        "settings": {"db": str(services.settings.db), "embedder": services.settings.embedder.model_dump(),
                     "store": services.settings.store.model_dump()},
        "plugins": sorted(name for name, _ in services.plugin_manager.list_name_plugin()),
        "embedder": {"id": kb.embedder.id, **kb.embedder.describe()},
        "tools_list": tool_listing.status(),
    }
    problems: list[str] = []  # the knowledge base cannot be used as configured
    warnings: list[str] = []  # it works, in a degraded way
    report["relevance_floor"] = _relevance_floor(services.settings.relevance_floor, kb.embedder)
    if report["relevance_floor"] is None:
        warnings.append(f"no relevance floor: {kb.embedder.id} has no calibrated one, so search always returns its "
                        "nearest content, however unrelated; set relevance_floor (DUCKGRAPH_RELEVANCE_FLOOR), "
                        "measured with contrib/bench/locomo.py")
    report["sharing"] = _sharing_state(services.settings.db)
    try:
        if report["sharing"].get("owner_pid"):  # a duckgraph server holds the file open: ask it
            from duckgraph.core.sharing import call_owner

            report["store"] = call_owner(services.settings.db, "health")
        else:
            with kb:
                report["store"] = kb.health()
    except DuckgraphError as exc:
        problems.append(str(exc))
    if report["sharing"].get("problem"):
        problems.append(report["sharing"]["problem"])
    store = report.get("store", {})
    degraded = {kind: mode for kind, mode in store.get("vector_search", {}).items() if "vss unavailable" in mode}
    if degraded:  # only the opt-in vss HNSW path needs vss; the default IVF index does not
        warnings.append(f"vss is not loaded ({store['vss']['problem']}): {', '.join(degraded)} vector search uses "
                        "an exact scan")
    if store and store.get("read_only"):
        warnings.append(f"the file is read-only ({store['read_only']}): searches work, writes are refused")
    recorded = store.get("embedder")
    if recorded and recorded["id"] != kb.embedder.id:
        problems.append(f"the file was built with {recorded['id']!r} but {kb.embedder.id!r} is configured")
    report["problems"], report["warnings"] = problems, warnings
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print_doctor(report)
    return 1 if problems else 0


def _relevance_floor(configured: float | None, embedder: Any) -> dict[str, Any] | None:
    """The floor search applies and where it comes from, or None when there is none."""
    if configured is not None:
        return {"value": configured, "from": "the relevance_floor setting"} if configured else None
    if embedder.relevance_floor is not None:
        return {"value": embedder.relevance_floor, "from": f"calibrated for {embedder.id}"}
    return None


def _sharing_state(db: Path) -> dict[str, Any]:
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
        return {"held": True, "owner_pid": None, "recorded_pid": info.get("pid"), "problem": str(exc)}
    clients = [pid for pid in status.get("client_pids", []) if pid != os.getpid()]  # not this command
    return {"held": True, "owner_pid": status.get("pid"), "since": status.get("since"), "client_pids": clients,
            "socket": status.get("socket")}


def _print_doctor(report: dict[str, Any]) -> None:
    print(f"duckgraph {report['duckgraph']} on Python {report['python']}")
    print(f"database:  {report['settings']['db']}")
    shared = report.get("sharing", {})
    if shared.get("owner_pid"):
        clients = ", ".join(map(str, shared["client_pids"])) or "none"
        print(f"sharing:   owned by the duckgraph server pid {shared['owner_pid']} (since {shared['since']}); "
              f"servers using it through that one: {clients}; the checks below went through it")
    elif shared.get("held"):
        print(f"sharing:   held by duckgraph pid {shared.get('recorded_pid') or '?'}, which does not answer")
    elif shared.get("held") is False:
        print("sharing:   no duckgraph server has the file open")
    print(f"embedder:  {report['embedder']['id']}")
    floor = report["relevance_floor"]
    print(f"relevance floor: {floor['value']} ({floor['from']})" if floor else "relevance floor: none")
    for label, text in report["embedder"].items():
        if label != "id":
            print(f"embedder {label}: {text}")
    store = report.get("store")
    if store:
        recorded = store["embedder"]
        print(f"schema:    version {store['schema_version']}")
        print(f"built with: {recorded['id']} ({recorded['dimensions']} dimensions)" if recorded
              else "built with: (no embedder recorded yet)")
        vss = store["vss"]
        print(f"vss:       {'loaded from ' + vss['path'] if vss['loaded'] else 'NOT loaded: ' + vss['problem']}")
        for kind, mode in store["vector_search"].items():
            print(f"{kind} vector search: {mode}")
        print(f"passage texts: {store.get('passage_texts', 'not reported')}")
        print(f"memory limit: {store.get('memory_limit', 'not reported')}")
        print(f"vectors in memory: {store.get('vectors_in_memory', 'not reported')}")
        print(f"vectors in the file: {store.get('vectors_in_file', 'not reported')}")
        print(f"keyword index: {store.get('keyword_index', 'not reported')}")
    print("plugins:   " + ", ".join(report["plugins"]))
    print(f"tools/list at start: {report['tools_list']}")
    for problem in report["problems"]:
        print(f"problem:   {problem}")
    for warning in report["warnings"]:
        print(f"warning:   {warning}")
    if not report["problems"] and not report["warnings"]:
        print("no problems found")


def _export(args: argparse.Namespace) -> int:
    from duckgraph.core.files.export import export_jsonl

    services = _setup(args)
    with services.knowledge_base as kb:
        if not args.output or args.output == "-":
            summary = export_jsonl(kb, sys.stdout, embeddings=args.embeddings)
            target = "standard output"
        else:
            # Written next to the target and renamed over it: an interrupted export leaves no half file.
            path = Path(args.output).expanduser()
            partial = path.with_name(path.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8", newline="\n") as out:
                    summary = export_jsonl(kb, out, embeddings=args.embeddings)
                partial.replace(path)
            except OSError as exc:
                partial.unlink(missing_ok=True)
                raise DuckgraphError(f"cannot write {path}: {exc}") from exc
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            target = str(path)
    print(f"exported {summary.documents} documents ({summary.chunks} passages), {summary.nodes} entities, "
          f"{summary.edges} relations{' with embeddings' if summary.embeddings else ''} to {target}",
          file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from duckgraph.core.files.import_ import import_file, import_lines

    services = _setup(args)
    bar = ProgressBar()
    bar.label = "import"
    with services.knowledge_base as kb:
        if args.file == "-":
            summary = import_lines(kb, sys.stdin, source="<stdin>", reembed=args.reembed, progress=bar.update)
        else:
            summary = import_file(kb, args.file, reembed=args.reembed, progress=bar.update)
    bar.finish()
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(f"{summary.format} file imported: {summary.documents_written} documents written "
              f"({summary.documents_unchanged} unchanged), {summary.nodes_created} entities created, "
              f"{summary.nodes_updated} updated ({summary.nodes_unchanged} unchanged), {summary.edges_created} "
              f"relations created, {summary.edges_updated} updated ({summary.edges_unchanged} unchanged), "
              f"{summary.mentions_added + summary.evidence_added} provenance links added")
    for reason in summary.skipped:
        print(f"duckgraph: skipped {reason}", file=sys.stderr)
    return 0


def _backup_command(args: argparse.Namespace) -> int:
    services = _setup(args)
    # Relative to where the command runs, whichever process ends up writing the copy.
    destination = Path(args.path).expanduser().absolute()
    result = _backup(services, destination, args.force)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"backed up {services.settings.db} to {result['path']} ({result['bytes']:,} bytes): {result['nodes']} "
              f"entities, {result['edges']} relations, {result['documents']} documents, {result['chunks']} passages")
    return 0


def _backup(services: Any, destination: Path, force: bool) -> dict[str, Any]:
    """Back the knowledge file up through the duckgraph server that holds it, else by opening it here
    (KnowledgeBase.backup does the work and the checks)."""
    source = Path(services.settings.db).expanduser()
    if not source.is_file():
        raise DuckgraphError(f"there is no knowledge file at {source} to back up (set it with --db or DUCKGRAPH_DB)")
    remote = _backup_through_owner(source, destination, force)
    if remote is not None:
        return remote
    with services.knowledge_base as kb:
        return kb.backup(destination, force=force)


def _backup_through_owner(db: Path, destination: Path, force: bool) -> dict[str, Any] | None:
    """While a duckgraph server holds the file (so this process cannot open it), that server makes the copy
    (core/sharing/); None when no server holds it."""
    from duckgraph.core import sharing

    if sharing.holder(db) is None:
        return None
    try:
        return sharing.call_owner(db, "backup", {"path": str(destination), "force": force})
    except sharing.NoOwnerError:
        if sharing.holder(db) is None:  # it stopped meanwhile: the file is free
            return None
        raise


def _demo(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput

    data = json.loads(resources.files("duckgraph.core").joinpath("data/demo.json").read_text(encoding="utf-8"))
    if args.db:
        path = Path(args.db).expanduser()
        if path.exists():
            print(f"duckgraph: {path} exists; the demo needs a fresh file", file=sys.stderr)
            return 1
    else:
        path = Path(tempfile.mkdtemp(prefix="duckgraph-demo-")) / "demo.duckdb"
    print(f"Loading the demo knowledge base into {path} ...", file=sys.stderr)
    with _setup(args, db=str(path)).knowledge_base as kb:
        docs = kb.add_documents([DocumentInput(**d) for d in data["documents"]])
        graph = kb.add_knowledge_graph([NodeInput(**n) for n in data["nodes"]],
                                       [EdgeInput(**e) for e in data["edges"]])
        print(f"{len(docs.documents)} documents, {graph.nodes_created} entities, {graph.edges_created} relations\n")
        for query in data["queries"]:
            result = kb.search(query, max_passages=2, token_budget=600)
            print(f"== search: {query}")
            print(result.text)
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
