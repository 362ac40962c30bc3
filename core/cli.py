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
        code = args.run(args) or 0
        sys.stdout.flush()  # here rather than at exit, so that a reader gone early is handled below
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except DuckgraphError as exc:
        print(f"duckgraph: {exc}", file=sys.stderr)
        _hint_when_a_server_holds_the_file(args, exc)
        return 1
    except KeyboardInterrupt:
        return 130


def _stdout_closed() -> int:
    """The reader of standard output stopped early (`duckgraph stats --json | head`): end quietly, as a command
    killed by SIGPIPE would (exit status 128 + 13), without a traceback."""
    try:
        # Python flushes stdout again at exit: point it at /dev/null so that this flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (an embedding, a test)
        pass
    return 141


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

    ingest = sub.add_parser("ingest", parents=[common], help="add .txt and .md files or folders as documents "
                                                             "(again: changed files replaced, unchanged skipped)")
    ingest.add_argument("paths", nargs="+", metavar="PATH",
                        help="files or folders (searched recursively); a document's id is the file's absolute path")
    ingest.add_argument("--prune", action="store_true",
                        help="also delete the documents of files gone from the given folders, with the entities and "
                             "relations only those documents supported")
    extract = ingest.add_mutually_exclusive_group()
    extract.add_argument("--extract", dest="extract", action="store_true", default=None,
                         help="extract entities and relationships (default: when an extractor is configured)")
    extract.add_argument("--no-extract", dest="extract", action="store_false")
    ingest.add_argument("--follow-symlinks", action="store_true",
                        help="also read files and folders that symbolic links in the given folders lead to outside "
                             "them (default: skipped and reported)")
    ingest.add_argument("--json", action="store_true", help="print the result of every batch as JSON")
    ingest.set_defaults(run=_ingest)

    search = sub.add_parser("search", parents=[common], help="anchor & expand search")
    search.add_argument("query", help="the question or keywords, in natural language")
    search.add_argument("--json", action="store_true", help="print the structured result")
    search.add_argument("--hops", type=int, metavar="N",
                        help="how many relations away from the anchor entities to expand (default 2)")
    search.add_argument("--k-anchors", type=int, metavar="N",
                        help="how many entities the query matches best to start from (default 5)")
    search.add_argument("--max-nodes", type=int, metavar="N", help="the most entities to return (default 30)")
    search.add_argument("--max-passages", type=int, metavar="N", help="the most document passages to return (default 5)")
    search.add_argument("--token-budget", type=int, default=2_000, metavar="N",
                        help="the length of the text answer in tokens, about 4 characters each (default 2000)")
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
    export.add_argument("--format", choices=["duckgraph", "memory-jsonl"], default="duckgraph",
                        help="duckgraph (default): everything, for `duckgraph import`; memory-jsonl: the reference "
                             "MCP memory server's memory.jsonl (entities, observations and relations of the "
                             "configured namespace)")
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

    return bootstrap(_settings(args, **overrides))


def _settings(args: argparse.Namespace, **overrides: Any):
    """The layered settings for this command, with logging to stderr set up at their level."""
    from duckgraph.core.config import load_settings
    from duckgraph.core.files.paths import refuse_as_database

    settings = load_settings(args.config, db=overrides.pop("db", None) or args.db,
                             log_level=args.log_level, **overrides)
    refuse_as_database(settings.db)
    logging.basicConfig(
        level=settings.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


def _serve(args: argparse.Namespace) -> int:
    if not args.http and (args.host is not None or args.port is not None):
        print("duckgraph: --host and --port go with --http", file=sys.stderr)
        return 2
    # Settings errors must reach the user before the MCP handshake, not as a crash inside it.
    services = _setup(args)
    if args.http:
        from duckgraph.core.mcp.http import (DEFAULT_HOST, DEFAULT_PORT, check_binding, endpoint_url,
                                             listening_socket)
        from duckgraph.core.mcp.transports import serve_http

        host = DEFAULT_HOST if args.host is None else args.host
        port = DEFAULT_PORT if args.port is None else args.port
        if not 0 <= port <= 65_535:
            print(f"duckgraph: --port {port} is not a port number", file=sys.stderr)
            return 2
        token = services.settings.http_token
        check_binding(host, token.get_secret_value() if token else None)
        sock = listening_socket(host, port)  # a port in use is an error here, before anything is announced
        port = sock.getsockname()[1]  # the one the system chose for --port 0
        print(f"duckgraph: serving MCP at {endpoint_url(host, port)} "
              f"({'bearer token required' if token else 'no token: this machine only'})", file=sys.stderr)
        serve_http(services, host, port, sock)
        return 0
    from duckgraph.core.mcp.transports import serve

    serve(services)
    return 0


def _ingest(args: argparse.Namespace) -> int:
    from duckgraph.core.files import folder

    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS
    from duckgraph.core.terminal import for_stream

    files = folder.find_files(args.paths, follow_symlinks=args.follow_symlinks)
    prune = folder.folders(args.paths) if args.prune else []
    if not files and not prune:
        print("duckgraph: no .txt or .md files found in " + ", ".join(args.paths), file=sys.stderr)
        return 1
    services = _setup(args)
    extract = services.knowledge_base.extractor is not None if args.extract is None else args.extract
    bar = ProgressBar()

    def batch_done(result: Any) -> None:
        for entry in result.extractions:
            if entry.error:
                print(f"\nduckgraph: extraction failed for {entry.document_id}#{entry.chunk_id}: {entry.error}",
                      file=sys.stderr)
        if args.json:
            print(result.model_dump_json())

    with services.knowledge_base as kb:
        report = folder.ingest(kb, files, extract=extract, prune=prune, progress=bar.update,
                               label=lambda text: setattr(bar, "label", text), on_batch=batch_done)
    bar.finish()
    for path, why in report.skipped:  # a file name may hold anything, escape sequences included
        print(for_stream(f"duckgraph: skipped {path}: {why}", sys.stderr), file=sys.stderr)
    for path, parts in report.split.items():
        print(for_stream(f"duckgraph: {path} is longer than a document may be ({MAX_DOCUMENT_CHARS:,} characters): "
                         f"stored as {parts} documents", sys.stderr), file=sys.stderr)
    extractions = [e for r in report.results for e in r.extractions]
    failed = sum(r.extraction_errors for r in report.results)
    summary = (f"{len(report.stored)} documents stored, {len(report.unchanged)} unchanged, "
               f"{len(report.skipped)} skipped, {sum(r.chunks_written for r in report.results)} passages")
    if report.split:
        summary += f" ({len(report.split)} long files split into {sum(report.split.values())} documents)"
    if args.prune:
        summary += (f"; pruned {len(report.pruned)} documents of files gone, with {report.nodes_pruned} entities "
                    f"and {report.edges_pruned} relations only they supported")
    if extract:
        already = sum(1 for e in extractions if e.skipped)
        summary += f", {sum(1 for e in extractions if not e.error and not e.skipped)} passages extracted"
        summary += (f" ({already} had been already)" if already else "") + f", {failed} failed"
    print(summary, file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0


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
    from duckgraph.core.terminal import for_stream

    # Stored texts may hold terminal escape sequences: shown escaped on a terminal (JSON escapes them itself).
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(result.text, sys.stdout))
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
    from duckgraph.core import doctor
    from duckgraph.core.plugin_manager import build_plugin_manager

    report = doctor.diagnose(_settings(args), build_plugin_manager())
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        doctor.print_report(report)
    return 1 if report["problems"] else 0


def _export(args: argparse.Namespace) -> int:
    from duckgraph.core.files.export import export_jsonl
    from duckgraph.core.files.memory_jsonl import export_memory_jsonl

    if args.format == "memory-jsonl" and args.embeddings:
        raise DuckgraphError("--embeddings has no place in a memory-jsonl file: leave it out, or use --format "
                             "duckgraph")

    def write(kb, out):
        if args.format == "memory-jsonl":
            return export_memory_jsonl(kb, out)
        return export_jsonl(kb, out, embeddings=args.embeddings)

    services = _setup(args)
    if args.output and args.output != "-":
        from duckgraph.core.files.paths import refuse_to_write

        refuse_to_write(args.output, services.settings.db, "an export")
    with services.knowledge_base as kb:
        if not args.output or args.output == "-":
            summary = write(kb, sys.stdout)
            target = "standard output"
        else:
            # Written next to the target and renamed over it: an interrupted export leaves no half file.
            path = Path(args.output).expanduser()
            partial = path.with_name(path.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8", newline="\n") as out:
                    summary = write(kb, out)
                partial.replace(path)
            except OSError as exc:
                partial.unlink(missing_ok=True)
                raise DuckgraphError(f"cannot write {path}: {exc}") from exc
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            target = str(path)
    if args.format == "memory-jsonl":
        print(f"exported {summary.entities} entities and {summary.relations} relations of namespace "
              f"{summary.namespace!r} as a memory server memory.jsonl to {target}", file=sys.stderr)
    else:
        print(f"exported {summary.documents} documents ({summary.chunks} passages), {summary.nodes} entities, "
              f"{summary.edges} relations{' with embeddings' if summary.embeddings else ''} to {target}",
              file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from duckgraph.core.files.import_ import import_file, import_lines

    services = _setup(args)
    if args.file != "-":
        from duckgraph.core.files.paths import refuse_to_read

        refuse_to_read(args.file, services.settings.db, "import")
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
    for name in summary.placeholders:
        print(f"duckgraph: created {name!r} as an entity of type 'unknown': a relation names it and the file has no "
              "such entity", file=sys.stderr)
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
    if args.db:
        path = Path(args.db).expanduser()
        if path.exists():
            print(f"duckgraph: {path} exists; the demo needs a fresh file", file=sys.stderr)
            return 1
        return _run_demo(args, path, kept=True)
    # Removed afterwards, also when the demo fails or is interrupted: nothing is left behind in the temp folder.
    with tempfile.TemporaryDirectory(prefix="duckgraph-demo-") as folder:
        return _run_demo(args, Path(folder) / "demo.duckdb", kept=False)


def _run_demo(args: argparse.Namespace, path: Path, kept: bool) -> int:
    from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput

    data = json.loads(resources.files("duckgraph.core").joinpath("data/demo.json").read_text(encoding="utf-8"))
    where = path if kept else f"a temporary file, {path} (removed at the end; keep it with --db FILE)"
    print(f"Loading the demo knowledge base into {where} ...", file=sys.stderr)
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
