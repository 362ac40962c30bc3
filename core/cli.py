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
from duckgraph.core.cli_checks import (
    COMMUNITY_DEFAULTS,
    COMMUNITY_OPTIONS,
    CRAWL_DEPTH,
    CRAWL_PAGES,
    ROOTS_REFUSED,
    UsageError,
    ignored_ingest_options,
    or_default,
    refuse_empty_namespace,
    refuse_ignored_options,
    refuse_new_namespace,
    say_roots_fallback,
)
from duckgraph.core.files.new_file import NewFile, holds_nothing
from duckgraph.core.interrupts import exit_status, how, say_interrupted, sigterm_as_interrupt, stopped_by
from duckgraph.core.terminal import ProgressBar, for_stream, utf8_stdin, utf8_stdout
from duckgraph.ports import ConfigError, DuckgraphError, interruption


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    # Known args first: argparse reports a subcommand's unknown option with the top-level usage, which does not
    # show the subcommand's options; its own usage does.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "usage_error", parser.error)(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    put_back = sigterm_as_interrupt(args.command)
    try:
        refuse_ignored_options(args)
        code = args.run(args) or 0
        sys.stdout.flush()  # here rather than at exit, so that a reader gone early is handled below
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except UsageError as exc:
        args.usage_error(str(exc))  # exits 2
        raise
    except (Exception, KeyboardInterrupt) as exc:
        # Ctrl-C that lands during a DuckDB query is DuckDB's RuntimeError "Query interrupted" (the
        # KeyboardInterrupt its cause), which a caller may wrap in an error of its own: an interruption all the same.
        if (stop := stopped_by(exc)) is not None:
            return say_interrupted(args, stop)
        if isinstance(exc, DuckgraphError):
            print(f"duckgraph: {_held_by_duckgraph(args, exc) or exc}", file=sys.stderr)
            return 1
        raise
    finally:
        put_back()


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


def _held_by_duckgraph(args: argparse.Namespace, exc: DuckgraphError) -> str | None:
    """When the file could not be opened because a duckgraph server or web UI owns it, what to say instead of the
    lock error (which sees only a Python process, and so speaks of another program); None otherwise."""
    if args.command == "serve" or "locked" not in str(exc):
        return None
    try:
        from duckgraph.core import sharing
        from duckgraph.core.config import load_settings

        db = load_settings(args.config, db=args.db).db
        info = sharing.holder(db)
    except Exception:  # the lock error stands on its own
        return None
    if info is None:
        return None
    pid = info.get("pid", "?")
    owner = {
        "ui": f"the duckgraph web UI (`duckgraph ui`, pid {pid}): use the memory in that page, or stop it",
        "serve": f"a duckgraph MCP server (`duckgraph serve`, pid {pid}, which an MCP client started): use the "
                 "memory through that client, or stop it",
    }.get(info.get("command"), f"the duckgraph server or web UI pid {pid}: use the memory through it, or stop it")
    return f"{db} is in use by {owner}. `duckgraph doctor` and `duckgraph backup` work while it runs."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duckgraph", description="Local GraphRAG memory for AI agents, over MCP.")
    parser.add_argument("--version", action="version", version=f"duckgraph {__version__}")
    db_help = "database file (default: DUCKGRAPH_DB, the config file, or the user data dir)"
    common = _common_options(db_help)
    # backup, restore and compact act on the whole file: their --namespace is not shown, and refused when given.
    whole_file = _common_options(db_help, namespace=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)

    serve = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio, or streamable HTTP)")
    serve.add_argument("--http", action="store_true",
                       help="serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    serve.add_argument("--host", help="address to listen on with --http (default 127.0.0.1; any other than a "
                                      "loopback address needs a token: DUCKGRAPH_HTTP_TOKEN)")
    serve.add_argument("--port", type=int, help="port to listen on with --http (default 8765)")
    serve.set_defaults(run=_serve)

    demo = sub.add_parser("demo", help="load a small sample into a fresh file and search it",
                          parents=[_common_options("a new database file to load the sample into, kept afterwards "
                                                   "(default: a temporary file, removed at the end)")])
    demo.set_defaults(run=_demo)

    ingest = sub.add_parser("ingest", parents=[common], help="add files, folders and web pages as documents: text, "
                                                             "Markdown, PDF, HTML, DOCX, PPTX, EPUB (again: changed "
                                                             "ones replaced, unchanged skipped)")
    ingest.add_argument("paths", nargs="+", metavar="PATH",
                        help="files, folders (searched recursively) or http(s) URLs; a document's id is the file's "
                             "absolute path or the URL")
    ingest.add_argument("--prune", action="store_true",
                        help="also delete the documents of files gone from the given folders (with --crawl, of pages "
                             "gone from a URL's folder on its site), with the entities and relations only those "
                             "documents supported")
    ingest.add_argument("--prune-empty", action="store_true",
                        help="with --prune, also prune a folder that is empty (default: left as it is, since an empty "
                             "folder is more often a drive not mounted than files all deleted)")
    extract = ingest.add_mutually_exclusive_group()
    extract.add_argument("--extract", dest="extract", action="store_true", default=None,
                         help="extract entities and relationships (default: when an extractor is configured)")
    extract.add_argument("--no-extract", dest="extract", action="store_false")
    ingest.add_argument("--follow-symlinks", action="store_true",
                        help="also read files and folders that symbolic links in the given folders lead to outside "
                             "them (default: skipped and reported)")
    ingest.add_argument("--crawl", action="store_true",
                        help="also follow the links of the URLs given within their site (robots.txt and the sitemap "
                             "honoured)")
    # No defaults here (CRAWL_DEPTH, CRAWL_PAGES apply): a --depth or --max-pages given without --crawl would be
    # ignored, and is refused instead.
    ingest.add_argument("--depth", type=int, metavar="N",
                        help=f"with --crawl: how many links away from a URL given to go (default {CRAWL_DEPTH})")
    ingest.add_argument("--max-pages", type=int, metavar="M",
                        help=f"with --crawl: the most pages fetched for each URL given (default {CRAWL_PAGES})")
    ingest.add_argument("--json", action="store_true",
                        help="print the result of every batch as JSON, then the summary as one JSON object "
                             "({\"summary\": ...}; the summary line goes to stderr)")
    ingest.add_argument("--new-namespace", action="store_true", help=NEW_NAMESPACE_HELP)
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
    search.add_argument("--token-budget", type=int, metavar="N",
                        help="the length of the text answer in tokens: about 4 characters of English each, "
                             "1 to 2 in most other scripts (default 2000)")
    search.add_argument("--as-of", type=_moment, metavar="WHEN",
                        help="the facts valid then and no later passages (ISO date or date-time, UTC; default now)")
    search.add_argument("--include-history", action="store_true", help="add the facts that had ended by then")
    search.add_argument("--after", type=_moment, metavar="WHEN",
                        help="a window's start: only the facts valid, and passages of documents timed, within it")
    search.add_argument("--before", type=_moment, metavar="WHEN", help="the window's end (see --after)")
    search.set_defaults(run=_search)

    changes = sub.add_parser("changes", parents=[common], help="what was written, newest first (entities, facts "
                             "added or ended, documents, and what was deleted or replaced)")
    changes.add_argument("--since", type=_moment, metavar="WHEN", help="from this ISO date or date-time (UTC)")
    changes.add_argument("--until", type=_moment, metavar="WHEN", help="before this ISO date or date-time (UTC)")
    changes.add_argument("--limit", type=int, default=50, metavar="N", help="the most changes to list (default 50)")
    changes.add_argument("--offset", type=int, default=0, metavar="N",
                         help="skip this many changes, newest first (next_offset of a listing cut at --limit)")
    changes.add_argument("--json", action="store_true", help="print the structured result")
    changes.set_defaults(run=_changes)

    stats = sub.add_parser("stats", parents=[common], help="counts of nodes, edges, documents and types")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(run=_stats)

    namespaces = sub.add_parser("namespaces", parents=[common],
                                help="list the namespaces in the file, with their sizes and last write; or delete one")
    namespaces.add_argument("action", nargs="?", choices=["list", "delete"], default="list",
                            help="list (the default), or delete NAME and everything in it, for good")
    namespaces.add_argument("name", nargs="?", help="delete: the namespace to delete")
    namespaces.add_argument("--confirm", metavar="NAME", help="delete: the namespace's name again")
    namespaces.add_argument("--json", action="store_true")
    namespaces.set_defaults(run=_namespaces)

    documents = sub.add_parser("documents", parents=[common], help="delete documents stored by mistake, by id")
    documents.add_argument("action", choices=["delete"],
                           help="delete: the documents, their passages, and the entities and relations only they "
                                "supported, for good")
    documents.add_argument("ids", nargs="+", metavar="ID",
                           help="document ids, as search shows them (a passage's document_id)")
    documents.add_argument("--json", action="store_true", help="print the result as JSON")
    documents.set_defaults(run=_documents)

    communities = sub.add_parser("communities", parents=[common],
                                 help="communities of the graph and their reports (see docs/communities.md)")
    communities.add_argument("action", choices=["build", "search", "write"],
                             help="build: detect them and write extractive reports; search: global search; write: "
                                  "have the configured extractor model write the reports still extractive or stale")
    communities.add_argument("query", nargs="?", help="the question, for search")
    communities.add_argument("--level", type=int, help="search: the level (0 = broadest; default: fits the budget)")
    # No defaults here (COMMUNITY_DEFAULTS apply): each option belongs to one action, and is refused with another.
    communities.add_argument("--token-budget", type=int, metavar="N",
                             help="search: the length of the answer in tokens: about 4 characters of English "
                                  "each, 1 to 2 in most other scripts (default 2000)")
    communities.add_argument("--limit", type=int, help="write: reports to write at most (default 20)")
    communities.add_argument("--json", action="store_true", help="print the structured result")
    communities.set_defaults(run=_communities)

    doctor = sub.add_parser("doctor", parents=[common], help="check the installation and the database")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(run=_doctor)

    export = sub.add_parser("export", parents=[common], help="write the whole knowledge base (with --namespace: one "
                                                             "namespace) as JSON Lines")
    export.add_argument("-o", "--output", metavar="FILE", help="file to write (default: standard output)")
    export.add_argument("--embeddings", action="store_true",
                        help="include the vectors (a bigger file; importing it computes no embeddings)")
    export.add_argument("--format", choices=["duckgraph", "memory-jsonl"], default="duckgraph",
                        help="duckgraph (default): everything, for `duckgraph import`; memory-jsonl: the reference "
                             "MCP memory server's memory.jsonl (entities, observations and relations of the "
                             "configured namespace)")
    export.set_defaults(run=_export)

    imp = sub.add_parser("import", parents=[common],
                         help="read a duckgraph export or a memory server memory.jsonl into the database (with "
                              "--namespace: all of it into that namespace)")
    imp.add_argument("file", metavar="FILE", help="the JSON Lines file ('-' for standard input)")
    imp.add_argument("--re-embed", dest="reembed", action="store_true",
                     help="ignore the vectors in the file and compute them with the configured embedder")
    imp.add_argument("--json", action="store_true", help="print the summary as JSON")
    imp.add_argument("--new-namespace", action="store_true", help=NEW_NAMESPACE_HELP)
    imp.set_defaults(run=_import)

    backup = sub.add_parser("backup", parents=[whole_file],
                            help="write a consistent copy of the database file (also while a server uses it)")
    backup.add_argument("path", metavar="PATH", help="the file to write; the copy opens directly with --db PATH")
    backup.add_argument("--force", action="store_true", help="replace PATH if it exists")
    backup.add_argument("--json", action="store_true", help="print the result as JSON")
    backup.set_defaults(run=_backup_command)

    restore = sub.add_parser("restore", parents=[whole_file],
                             help="put a backup in place of the database file (stop its servers first); the file it "
                                  "replaces and its write-ahead log are kept aside")
    restore.add_argument("backup", metavar="BACKUP", help="the backup to restore (a file `duckgraph backup` wrote)")
    restore.add_argument("--json", action="store_true", help="print the result as JSON")
    restore.set_defaults(run=_restore_command)

    compact = sub.add_parser("compact", parents=[whole_file],
                             help="rewrite the database file without the free blocks that deleted and replaced rows "
                                  "left (stop its servers first); the counts are checked before it replaces the file")
    compact.add_argument("--keep-old", action="store_true",
                         help="keep the file as it was, as PATH.before-compact-TIME (default: removed, in the same "
                              "step that puts the checked compact file in its place)")
    compact.add_argument("--json", action="store_true", help="print the result as JSON")
    compact.set_defaults(run=_compact_command)

    ui = sub.add_parser("ui", parents=[common], help="a local web page to explore, check and curate the memory "
                                                     "(also while a server uses the file)")
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other than "
                                                        "a loopback address needs a token)")
    ui.add_argument("--port", type=int, default=8766, help="port to listen on (default 8766; 0: any free one)")
    ui.add_argument("--open", action="store_true", help="open the page in the web browser")
    ui.add_argument("--token", nargs="?", const="", metavar="TOKEN",
                    help="require this token (default: DUCKGRAPH_HTTP_TOKEN, if set); --token alone makes a new "
                         "one, printed in the page's address")
    ui.set_defaults(run=_ui)
    for command in sub.choices.values():
        command.set_defaults(usage_error=command.error)
    return parser


class _CommandParser(argparse.ArgumentParser):
    """A command's parser, where options may come anywhere among its positionals, as in `communities search --db F
    "main themes"`. argparse's plain parsing gives an optional positional (nargs="?", the query) nothing as soon as an
    option follows the one before it, and then refuses the text after the option as unrecognized."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        # parse_known_intermixed_args calls parse_known_args twice (options, then positionals): those calls parse.
        # After "--" everything is positional, which its first pass forgets (Python 3.11): parsed as before.
        if self._intermixing or (args is not None and "--" in args):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


NEW_NAMESPACE_HELP = ("with --namespace NAME: start the namespace NAME even though its name is near one the file "
                      "holds (without it, that is refused as a likely typo, and nothing is written)")


def _common_options(db_help: str, *, namespace: bool = True) -> argparse.ArgumentParser:
    """The options every command takes; `db_help` says where its --db goes by default. Without `namespace`, the
    --namespace option is still parsed (so that it is refused with the reason, cli_checks.WHOLE_FILE) but not shown."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help=db_help)
    common.add_argument("--config", help="TOML config file (default: DUCKGRAPH_CONFIG or the user config dir)")
    common.add_argument("--log-level", help="DEBUG, INFO, WARNING (default) or ERROR; logs go to stderr")
    common.add_argument("--namespace", metavar="NAME",
                        help="the memory (namespace) to use (default: DUCKGRAPH_NAMESPACE, the config file, or "
                             "'default'); serve also takes @roots (see docs/namespaces.md)" if namespace
                        else argparse.SUPPRESS)
    return common


def _setup(args: argparse.Namespace, *, existing: bool = False, **overrides: Any):
    """The services for this command. `existing`: the command reads (or changes) what is stored, so it refuses a
    database file that is not there rather than create an empty one (and its folders), with which a mistyped
    --db would "succeed"."""
    from duckgraph.core.bootstrap import bootstrap

    services = bootstrap(_settings(args, **overrides))  # opens nothing; says first what is wrong in the settings
    say_roots_fallback(args, services.settings)
    if existing:
        from duckgraph.core.files.paths import refuse_dangling_link

        path = Path(services.settings.db).expanduser()
        refuse_dangling_link(path)  # the memory is not missing, the link's target is: say so, as writing does
        if not path.exists():
            raise DuckgraphError(f"no memory at {path}: check --db / DUCKGRAPH_DB (or the config file's db); "
                                 "`duckgraph doctor` shows which file is used. Nothing was created")
    return services


def _settings(args: argparse.Namespace, **overrides: Any):
    """The layered settings for this command, with logging to stderr set up at their level."""
    from duckgraph.core.config import ENV_PREFIX, expand_path, load_settings
    from duckgraph.core.files.paths import refuse_as_database

    config = args.config or os.environ.get(ENV_PREFIX + "CONFIG")
    try:  # expanded as load_settings does ($HOME, ~), which would say a folder "does not exist"
        folder = expand_path(config) if config and config.strip() else None
    except ValueError:  # an unset variable, a blank at an end: load_settings says so
        folder = None
    if folder is not None and folder.is_dir():
        raise ConfigError(f"config file {folder} is a folder: give the TOML file's path with --config "
                          f"(DUCKGRAPH_CONFIG), e.g. {folder / 'config.toml'}")
    db = overrides.pop("db", None)
    settings = load_settings(args.config, db=args.db if db is None else db,
                             log_level=args.log_level, namespace=getattr(args, "namespace", None), **overrides)
    # A server whose database is a folder reaches the handshake: the store's open says what is wrong in every tool
    # call's answer (plugins/duckdb/connection.py), where the host shows it, as for the file's other problems.
    if not (args.command == "serve" and Path(settings.db).expanduser().is_dir()):
        refuse_as_database(settings.db)
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return settings


def _serve(args: argparse.Namespace) -> int:
    if not args.http and (args.host is not None or args.port is not None):
        print("duckgraph: --host and --port go with --http", file=sys.stderr)
        return 2
    from duckgraph.core import sharing

    sharing.set_command("serve")  # named in the lock file, for the messages of commands refused the file
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

    if sys.stdin.isatty():  # run by hand: it waits silently for JSON-RPC, which looks like a hang
        print("duckgraph: serving MCP on standard input and output: it waits for an MCP client, which starts it "
              "itself (configure one as docs/clients.md shows); Ctrl-D or Ctrl-C stops it", file=sys.stderr,
              flush=True)
    serve(services)
    return 0


def _ingest(args: argparse.Namespace) -> int:
    from duckgraph.core.files import folder

    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS
    if (args.depth is not None and args.depth < 0) or (args.max_pages is not None and args.max_pages < 1):
        print("duckgraph: --depth must be 0 or more and --max-pages 1 or more", file=sys.stderr)
        return 2
    if args.prune_empty and not args.prune:
        print("duckgraph: --prune-empty goes with --prune", file=sys.stderr)
        return 2
    urls = [p for p in args.paths if "://" in p]
    if refused := ignored_ingest_options(args, urls):
        print(f"duckgraph: {refused}; nothing was read", file=sys.stderr)
        return 2
    services = _setup(args)
    if args.extract and services.knowledge_base.extractor is None:
        raise ConfigError("--extract needs an extractor and none is configured: configure one (DUCKGRAPH_EXTRACTOR="
                          "ollama, or an [extractor] section in the config file; see docs/ollama.md), or run without "
                          "--extract to store the documents only; nothing was read")
    fetching = services.url_fetching
    paths = [p for p in args.paths if p not in urls]
    files = folder.find_files(paths, follow_symlinks=args.follow_symlinks, converters=fetching.converters.by_suffix)
    given = folder.folders(paths) if args.prune else []
    # An empty folder is more often a drive not mounted than files all deleted: pruning it deletes everything
    # stored under it, so only when asked.
    empty = [] if args.prune_empty else [f for f in given if not any(f.iterdir())]
    for found in empty:
        print(for_stream(f"duckgraph: not pruning {found}: the folder is empty (a drive not mounted?); give "
                         "--prune-empty to delete the documents stored under it", sys.stderr), file=sys.stderr)
    prune = [folder.prefix(f) for f in given if f not in empty]
    if all(isinstance(f, folder.FileDocument) and f.unsupported for f in files) and not prune and not urls:
        print("duckgraph: no documents found in " + ", ".join(args.paths), file=sys.stderr)
        _say_unsupported([(os.fsencode(f.path).decode("utf-8", "backslashreplace"), f.unsupported) for f in files])
        return 1
    extract = services.knowledge_base.extractor is not None if args.extract is None else args.extract
    bar = ProgressBar()
    try:
        # Opened before any page is fetched, and kept open for the ingest below, so that a namespace named by
        # mistake is refused first. A file not there yet holds no namespace to mistake it for: it is created by
        # the ingest's first write, as before (not here, where a failed fetch would leave it empty).
        if Path(services.settings.db).expanduser().exists():
            refuse_new_namespace(args, services.knowledge_base.open())
        if urls:
            bar.label = "web"
            crawl = fetching.fetch(urls, depth=or_default(args.depth, CRAWL_DEPTH) if args.crawl else 0,
                                   max_pages=or_default(args.max_pages, CRAWL_PAGES), progress=bar.update)
            files = [*files, *crawl.pages]
            if args.prune:  # a site is pruned only after a whole crawl (core/web/crawl.py)
                prune += crawl.whole
                for start, why in crawl.partial:
                    print(f"duckgraph: not pruning {start}: the crawl was not whole ({why})", file=sys.stderr)
    except BaseException:
        services.knowledge_base.close()
        raise
    bar.label = "ingest"

    def batch_done(result: Any) -> None:
        for entry in result.extractions:
            if entry.error:
                print(f"\nduckgraph: extraction failed for {entry.document_id}#{entry.chunk_id}: {entry.error}",
                      file=sys.stderr)
        if args.json:  # a file name or title may hold anything: escape sequences, characters stdout lacks
            print(for_stream(result.model_dump_json(), sys.stdout, json=True))

    def summarize(report: folder.IngestReport, stopped: bool) -> int:
        unsupported = {path for path, _ in report.unsupported}  # said by suffix, below
        for path, why in report.skipped:  # a file name may hold anything, escape sequences included
            if path not in unsupported:
                print(for_stream(f"duckgraph: skipped {path}: {why}", sys.stderr), file=sys.stderr)
        _say_unsupported(report.unsupported)
        for path, what in report.partly:
            print(for_stream(f"duckgraph: partly stored {path}: {what}", sys.stderr), file=sys.stderr)
        for path, parts in report.split.items():
            print(for_stream(f"duckgraph: {path} is longer than a document may be ({MAX_DOCUMENT_CHARS:,} "
                             f"characters): stored as {parts} documents", sys.stderr), file=sys.stderr)
        extractions = [e for r in report.results for e in r.extractions]
        failed = sum(r.extraction_errors for r in report.results)
        replaced = f" ({len(report.replaced)} replaced)" if report.replaced else ""
        removed = [sum(r.entities_removed for r in report.results), sum(r.relations_removed for r in report.results)]
        if any(removed):
            replaced = (f" ({len(report.replaced)} replaced, with {removed[0]} entities and {removed[1]} relations "
                        "only their old text supported)")
        kept = [sum(r.chunks_kept for r in report.results), sum(r.entities_kept for r in report.results),
                sum(r.relations_kept for r in report.results)]
        if any(kept[1:]):
            replaced = replaced[:-1] + (f"; {kept[1]} entities and {kept[2]} relations the new text still names "
                                        "kept)")
        summary = (f"{len(report.stored)} documents stored{replaced}, {len(report.unchanged)} unchanged, "
                   f"{len(report.skipped)} skipped, {sum(r.chunks_written for r in report.results)} passages")
        if kept[0]:
            summary += f" written ({kept[0]} unchanged passages of changed files kept)"
        if report.partly:
            summary += f", {len(report.partly)} long files partly stored"
        if report.split:
            summary += f" ({len(report.split)} long files split into {sum(report.split.values())} documents)"
        if report.emptied:
            summary += f"; deleted {len(report.emptied)} documents of files that hold no text now"
        pruned = args.prune and not (stopped and not report.pruned)  # stopped before pruning: none was
        if pruned:
            summary += (f"; pruned {len(report.pruned)} documents of files gone, with {report.nodes_pruned} "
                        f"entities and {report.edges_pruned} relations only they supported")
            if report.prune_kept:
                summary += (f"; kept {len(report.prune_kept)} documents of files that are there but were not read "
                            "this time")
        if extract:
            already = sum(1 for e in extractions if e.skipped)
            summary += f", {sum(1 for e in extractions if not e.error and not e.skipped)} passages extracted"
            summary += (f" ({already} had been already)" if already else "") + f", {failed} failed"
        print(summary, file=sys.stderr if args.json else sys.stdout)
        if args.json:
            print(for_stream(json.dumps({"summary": _ingest_summary(report, pruned=pruned, extract=extract)}),
                             sys.stdout, json=True))
        return 1 if failed or report.partly else 0

    report = folder.IngestReport()
    ingested = False  # every file stored: what stops it then stops only the file's closing
    created = NewFile(Path(services.settings.db).expanduser())  # not opened yet when new (above)
    opened = empty = False
    try:
        with services.knowledge_base as kb:
            opened = True
            try:
                folder.ingest(kb, files, extract=extract, prune=prune, progress=bar.update,
                              label=lambda text: setattr(bar, "label", text), on_batch=batch_done, report=report)
            except BaseException:
                # Asked of the file, not of the report: a batch's documents are stored before its extraction,
                # which may be what failed.
                empty = created.new and holds_nothing(kb)
                raise
            ingested = True
    except (Exception, KeyboardInterrupt) as exc:
        bar.finish()
        # A file this command created and left empty is removed, as a failed import's is (`_import`).
        said = created.remove() if empty or (created.new and not opened and interruption(exc) is not None) else None
        stored = bool(report.results or report.partly)
        if stored:  # what was stored before the error stays: say what it is
            try:
                summarize(report, stopped=not ingested)
            except BrokenPipeError:  # its JSON for a reader gone (ingest --json | head): the lines for stderr matter
                pass
        rest = ("what is counted above is stored: run it again to store the rest (stored files are left as they "
                "are)")
        if (stop := stopped_by(exc)) is not None:  # Ctrl-C or SIGTERM: said here, in full, not by main
            at = f" at {report.stopped_at}" if report.stopped_at and not ingested else ""
            print(f"duckgraph: ingest {how(stop)}{at}: " + (
                "all of it is stored (it was closing the file)" if ingested
                else rest if stored else "nothing was stored" + (f" and {said}" if said else "")), file=sys.stderr)
            return exit_status(stop)
        if stored:
            why = ("because its standard output was closed (the reader stopped early)"
                   if isinstance(exc, BrokenPipeError) else "by the error below")
            print(f"duckgraph: ingest stopped at {report.stopped_at} {why}; {rest}", file=sys.stderr)
        if said and isinstance(exc, DuckgraphError):
            raise DuckgraphError(f"{str(exc).rstrip('.')}; {said}") from exc
        raise
    bar.finish()
    return summarize(report, stopped=False)


def _say_unsupported(unsupported: list[tuple[str, str]]) -> None:
    """The files in the folders given that no converter reads, on one line per suffix (a folder of photos beside
    the notes would otherwise bury the other lines), each named at INFO."""
    from duckgraph.core.files.folder import NO_SUFFIX
    by_suffix: dict[str, list[str]] = {}
    for path, suffix in unsupported:
        by_suffix.setdefault(suffix, []).append(path)
        logging.getLogger("duckgraph.ingest").info("skipped %s: no converter reads its suffix (%s)", path, suffix)
    for suffix, paths in sorted(by_suffix.items()):
        shown = ", ".join(paths[:3])
        if len(paths) > 3:
            shown += f" and {len(paths) - 3} more (--log-level INFO names them all)"
        what = "without a suffix" if suffix == NO_SUFFIX else f"with the suffix {suffix}"
        print(for_stream(f"duckgraph: skipped {len(paths)} {'file' if len(paths) == 1 else 'files'} {what}, "
                         "which no converter reads (a plugin can add one: docs/plugins.md; to read a file as text, "
                         f"give it by name: duckgraph ingest FILE): {shown}", sys.stderr), file=sys.stderr)


def _ingest_summary(report: Any, *, pruned: bool, extract: bool) -> dict[str, Any]:
    """`ingest --json`'s last object: the summary line's numbers, with the files skipped (and why) and the
    documents pruned and kept by path."""
    extractions = [e for r in report.results for e in r.extractions]
    summary: dict[str, Any] = {
        "stored": len(report.stored), "replaced": len(report.replaced), "unchanged": len(report.unchanged),
        "passages": sum(r.chunks_written for r in report.results),
        "skipped": [{"path": path, "why": why} for path, why in report.skipped],
        "partly": [{"path": path, "what": what} for path, what in report.partly],
        "split": dict(report.split), "emptied": list(report.emptied),
    }
    if pruned:
        summary.update(pruned=list(report.pruned), entities_pruned=report.nodes_pruned,
                       relations_pruned=report.edges_pruned, kept=list(report.prune_kept))
    if extract:
        summary.update(extracted=sum(1 for e in extractions if not e.error and not e.skipped),
                       extraction_errors=sum(r.extraction_errors for r in report.results))
    if report.stopped_at:
        summary["stopped_at"] = report.stopped_at
    return summary


def _communities(args: argparse.Namespace) -> int:
    if args.action == "search" and not (args.query or "").strip():
        print("duckgraph communities search: give the question, e.g. duckgraph communities search \"main themes\"",
              file=sys.stderr)
        return 2
    if args.action != "search" and args.query is not None:
        raise UsageError(f"communities {args.action} takes no query ({args.query!r}): only search does")
    # `write --limit` is the number of reports to write, which communities_to_summarize bounds for the host.
    _numbers(args, {"level": "global_search", "token_budget": "global_search", "limit": "communities_to_summarize"})
    ignored = [f"--{name.replace('_', '-')}" for name, action in COMMUNITY_OPTIONS.items()
               if getattr(args, name) is not None and action != args.action]
    if ignored:
        raise UsageError(f"communities {args.action} takes no {' or '.join(ignored)}: --level and --token-budget go "
                         "with search, --limit with write; nothing was done")
    for name, default in COMMUNITY_DEFAULTS.items():
        setattr(args, name, or_default(getattr(args, name), default))
    bar = ProgressBar()
    bar.label = f"communities {args.action}"
    with _setup(args, existing=True).knowledge_base as kb:
        service = kb.communities
        if args.action == "build":
            result = service.build(kb.namespace, bar.update)
        elif args.action == "write":
            result = service.write_with_model(kb.namespace, limit=args.limit, progress=bar.update)
        else:
            result = service.global_search(args.query, kb.namespace, level=args.level, token_budget=args.token_budget)
    bar.finish()
    text = result.text if args.action == "search" else "\n".join(
        f"{key}: {value}" for key, value in result.model_dump().items() if value is not None)
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(text, sys.stdout))
    return 0


def _search(args: argparse.Namespace) -> int:
    numbers = _search_numbers(args)
    with _setup(args, existing=True).knowledge_base as kb:
        result = kb.search(args.query, **numbers, as_of=args.as_of, include_history=args.include_history or None,
                           after=args.after, before=args.before)
    # Stored texts may hold terminal escape sequences: shown escaped on a terminal (JSON escapes them itself).
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(result.text, sys.stdout))
    return 0


def _search_numbers(args: argparse.Namespace) -> dict[str, int]:
    """The numbers given to `search`, held to the limits the MCP tool `search` holds them to."""
    from duckgraph.core.domain.search_options import CALLER_LIMITS

    return _numbers(args, dict.fromkeys(CALLER_LIMITS, "search"))


def _numbers(args: argparse.Namespace, tools: dict[str, str]) -> dict[str, int]:
    """The flags named in `tools` that were given, each held to the range the MCP tool named beside it takes for
    the same argument (core/domain/search_options.py's TOOL_LIMITS): a value the tool would refuse is a usage
    error here too, before the file is opened, so the command line and the tools take the same numbers."""
    from duckgraph.core.domain.search_options import TOOL_LIMITS

    given = {name: getattr(args, name) for name in tools if getattr(args, name) is not None}
    for name, value in given.items():
        low, high = TOOL_LIMITS[tools[name]][name]
        if not low <= value <= high:
            raise UsageError(f"--{name.replace('_', '-')} must be from {low} to {high}, not {value}")
    return given


def _moment(text: str) -> Any:
    from duckgraph.core.domain.moments import parse_moment

    try:
        return parse_moment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _changes(args: argparse.Namespace) -> int:
    _numbers(args, {"limit": "recent_changes"})
    with _setup(args, existing=True).knowledge_base as kb:
        result = kb.recent_changes(since=args.since, until=args.until, limit=args.limit, offset=args.offset,
                                   token_budget=10**9)
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(result.text, sys.stdout))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.namespaces import namespace_hint

    with _setup(args, existing=True).knowledge_base as kb:
        stats = {"namespace": kb.namespace, **kb.stats(kb.namespace)}
        if "hint" in stats:  # zeros alone read like a memory that forgot everything, not a mistyped namespace
            stats["hint"] = (f"the namespace {kb.namespace!r} holds nothing yet: "
                             f"{namespace_hint(kb.namespace, kb.store.namespaces())}")
    if "hint" in stats and not args.json:
        print(f"duckgraph: {stats['hint']}", file=sys.stderr)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(f"{stats['nodes']} nodes, {stats['edges']} edges, {stats['documents']} documents, "
              f"{stats['chunks']} passages (namespace {stats['namespace']})")
        for label in ("node_types", "edge_types"):  # stored names: escaped as search's texts are
            if stats[label]:
                print(for_stream(f"{label.replace('_', ' ')}: " + ", ".join(f"{k} ({v})" for k, v in
                                                                           stats[label].items()), sys.stdout))
    return 0


def _namespaces(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.namespaces import list_namespaces

    if args.action == "delete":
        return _delete_namespace(args)
    if args.name is not None or args.confirm is not None:
        raise UsageError("namespaces list takes no NAME or --confirm (to delete one: duckgraph namespaces delete NAME "
                         "--confirm NAME)")
    with _setup(args, existing=True).knowledge_base as kb:
        found = list_namespaces(kb).namespaces
    if args.json:
        print(json.dumps([n.model_dump(mode="json") for n in found], indent=2))
        return 0
    for n in found:
        when = f", last write {n.last_write}" if n.last_write else ""
        print(f"{n.name}{' (default)' if n.default else ''}: {n.entities} entities, {n.relations} relations, "
              f"{n.documents} documents{when}")
    return 0


def _delete_namespace(args: argparse.Namespace) -> int:
    from duckgraph.core.config import ROOTS_NAMESPACE
    from duckgraph.core.domain.namespaces import delete_namespace
    from duckgraph.ports import InvalidInputError

    # Checked before the file is opened, and reported with the usage (exit status 2) as argparse's own errors are.
    if not args.name or args.confirm is None:
        raise UsageError("namespaces delete takes NAME and --confirm NAME (the name twice: it deletes everything in "
                         "that namespace for good); nothing was deleted")
    if args.confirm != args.name:
        raise UsageError(f"--confirm must repeat the name to delete: {args.name!r} (got {args.confirm!r}); nothing "
                         "was deleted")
    if args.name == ROOTS_NAMESPACE:
        raise InvalidInputError(f"{ROOTS_REFUSED}; nothing was deleted")
    with _setup(args, existing=True).knowledge_base as kb:
        result = delete_namespace(kb, args.name, args.confirm, kb.namespace)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print(f"{result.message}: {result.entities} entities, {result.relations} relations, "
              f"{result.documents} documents")
    return 0


def _documents(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.documents import delete_documents

    with _setup(args, existing=True).knowledge_base as kb:
        result = delete_documents(kb, args.ids, kb.namespace, name_other_namespaces=True)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print(for_stream(f"deleted {len(result.deleted)} documents, with {result.entities_removed} entities and "
                         f"{result.relations_removed} relations only they supported" + "".join(
                             f"\n  {i}" for i in result.deleted), sys.stdout))  # stored ids: escaped as search's
    for hint in result.hints:
        print(f"duckgraph: {hint}", file=sys.stderr)
    # An id that named nothing is a mistake to see in scripts too (the others were deleted).
    return 1 if result.not_found else 0


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
    from duckgraph.core.files.export import export_jsonl, write_file
    from duckgraph.core.files.memory_jsonl import export_memory_jsonl

    if args.format == "memory-jsonl" and args.embeddings:
        raise UsageError("--embeddings has no place in a memory-jsonl file: leave it out, or use --format duckgraph; "
                         "nothing was written")

    def write(kb, out):
        if args.format == "memory-jsonl":
            return export_memory_jsonl(kb, out)
        return export_jsonl(kb, out, embeddings=args.embeddings, namespace=args.namespace)

    services = _setup(args, existing=True)
    if args.output and args.output != "-":
        from duckgraph.core.files.paths import refuse_to_write

        refuse_to_write(args.output, services.settings.db, "an export")
    with services.knowledge_base as kb:
        refuse_empty_namespace(args, kb)
        if not args.output or args.output == "-":
            summary = write(kb, utf8_stdout())
            target = "standard output"
        else:
            # Beside the file and renamed over it, with the memory's permissions (files/export.py).
            memory = Path(services.settings.db).expanduser()
            summary = write_file(args.output, memory, lambda out: write(kb, out))
            target = str(Path(args.output).expanduser())
    if args.format == "memory-jsonl":
        print(f"exported {summary.entities} entities and {summary.relations} relations of namespace "
              f"{summary.namespace!r} as a memory server memory.jsonl to {target}", file=sys.stderr)
    else:
        print(f"exported {summary.documents} documents ({summary.chunks} passages), {summary.nodes} entities, "
              f"{summary.edges} relations{' with embeddings' if summary.embeddings else ''} to {target}",
              file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    services = _setup(args)
    if args.file != "-":
        from duckgraph.core.files.paths import refuse_to_read

        refuse_to_read(args.file, services.settings.db, "import")
        # Checked before the database is opened, which creates it: a wrong name must leave no new file behind.
        source = Path(args.file).expanduser()
        problem = ("does not exist" if not source.exists() else "is a folder" if source.is_dir()
                   else "is not readable by this user" if not os.access(source, os.R_OK) else None)
        if problem:
            raise DuckgraphError(f"cannot read {args.file}: it {problem}; nothing was imported")
    bar = ProgressBar()
    bar.label = "import"
    created = NewFile(Path(services.settings.db).expanduser())  # before the open below creates the file
    opened = imported = False
    try:
        with services.knowledge_base as kb:
            opened = True
            summary = _import_into(kb, args, bar)
            imported = True  # committed: what fails from here on (closing the file) leaves it
    except BaseException as exc:
        stop = interruption(exc)
        # An import is one transaction: one that failed into a file this command created left it empty, and doctor
        # and the next commands would take that file, which nobody asked for, for a memory. A failed open keeps it
        # (but for Ctrl-C, which lands only once this process has it): DuckDB refuses a file that another process
        # created meanwhile and holds, which is not this command's to delete.
        if created.new and not imported and (opened or stop is not None):
            args.new_file_said = said = created.remove()  # said after Ctrl-C (core/interrupts.py)
            if stop is None and isinstance(exc, DuckgraphError):
                raise DuckgraphError(f"{str(exc).rstrip('.')}; {said}") from exc
        raise
    bar.finish()
    if args.json:
        # ASCII with \u escapes (json.dumps' default): the same JSON in any locale's encoding, where raw names
        # would fail on one the encoding lacks ("Ł" in cp1252) or reach a UTF-8 reader garbled.
        print(json.dumps(summary.model_dump(mode="json"), indent=2))
    else:
        print(f"{summary.format} file imported: {summary.documents_written} documents written "
              f"({summary.documents_unchanged} unchanged), {summary.nodes_created} entities created, "
              f"{summary.nodes_updated} updated ({summary.nodes_unchanged} unchanged), {summary.edges_created} "
              f"relations created, {summary.edges_updated} updated ({summary.edges_unchanged} unchanged), "
              f"{summary.mentions_added + summary.evidence_added} provenance links added")
    for name in summary.placeholders:
        print(f"duckgraph: created {name!r} as an entity of type 'unknown': a relation names it, and neither the "
              "file nor the knowledge base has such an entity", file=sys.stderr)
    for reason in summary.partly_imported:
        print(f"duckgraph: imported in part {reason}", file=sys.stderr)
    if summary.nodes_values_replaced:  # the file's values win: say which stored ones are gone
        count, more = summary.nodes_values_replaced, summary.nodes_values_replaced - len(summary.values_replaced)
        print(f"duckgraph: {count} {'entity' if count == 1 else 'entities'} had stored values replaced by the "
              f"file's: {', '.join(summary.values_replaced)}{f' and {more} more' if more else ''}", file=sys.stderr)
    if summary.edges_values_replaced:
        count = summary.edges_values_replaced
        more = count - len(summary.relation_values_replaced)
        print(f"duckgraph: {count} {'relation' if count == 1 else 'relations'} had stored values replaced by the "
              f"file's: {', '.join(summary.relation_values_replaced)}{f' and {more} more' if more else ''}",
              file=sys.stderr)
    if summary.names_resolved:  # the file's name for a stored entity: what it was imported onto
        count, more = summary.names_resolved, summary.names_resolved - len(summary.resolved)
        print(f"duckgraph: {count} {'name' if count == 1 else 'names'} of the file resolved to a stored entity (an "
              f"alias of it), and imported onto it: {', '.join(summary.resolved)}{f' and {more} more' if more else ''}",
              file=sys.stderr)
    for reason in summary.skipped:
        print(f"duckgraph: skipped {reason}", file=sys.stderr)
    return 0


def _import_into(kb: Any, args: argparse.Namespace, bar: ProgressBar) -> Any:
    """Import the file (or standard input) that `args` names into the open knowledge base."""
    from duckgraph.core.files.import_ import import_file, import_lines

    refuse_new_namespace(args, kb)  # before a line is read or written
    if args.file == "-":
        stdin = utf8_stdin()
        try:
            summary = import_lines(kb, stdin, source="<stdin>", reembed=args.reembed, progress=bar.update,
                                   namespace=args.namespace)
        except UnicodeDecodeError as exc:  # raised inside the import's transaction: rolled back, nothing kept
            raise DuckgraphError(f"standard input is not UTF-8 text ({exc}); nothing was imported: JSON Lines "
                                 "are read as UTF-8 whatever the locale, convert it first (iconv -t UTF-8)"
                                 ) from exc
        finally:
            if stdin is not sys.stdin:
                stdin.detach()
    else:
        summary = import_file(kb, args.file, reembed=args.reembed, progress=bar.update, namespace=args.namespace)
    return summary


def _backup_command(args: argparse.Namespace) -> int:
    services = _setup(args, existing=True)
    # Relative to where the command runs, whichever process ends up writing the copy.
    destination = Path(args.path).expanduser().absolute()
    result = _backup(services, destination, args.force)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from duckgraph.core.files.backup import relations

        print(f"backed up {services.settings.db} to {result['path']} ({result['bytes']:,} bytes): {result['nodes']} "
              f"entities, {relations(result)}, {result['documents']} documents, {result['chunks']} passages")
    return 0


def _restore_command(args: argparse.Namespace) -> int:
    from duckgraph.core.files.backup import counts, relations, restore

    db = Path(_settings(args).db).expanduser()

    def check(copy: Path) -> dict[str, int]:
        """Open the copy as the knowledge file will be opened: a backup that does not open is refused."""
        with _setup(args, db=str(copy)).knowledge_base as kb:
            return counts(kb)

    result = restore(args.backup, db, check)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"restored {result['path']} from {result['backup']} ({result['bytes']:,} bytes): {result['nodes']} "
          f"entities, {relations(result)}, {result['documents']} documents, {result['chunks']} passages")
    if result["kept"]:
        print("the file it replaced is kept as " + " and ".join(result["kept"]) + " (open it with --db to read it)")
    return 0


def _compact_command(args: argparse.Namespace) -> int:
    from duckgraph.core.files.backup import compact, relations

    db = Path(_setup(args, existing=True).settings.db).expanduser()  # a missing file is said as other commands say it
    # The file and its copy are each opened as the knowledge file is: a copy that does not open is refused.
    result = compact(db, lambda path: _setup(args, db=str(path)).knowledge_base, keep_old=args.keep_old)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    before, after = result["bytes_before"], result["bytes"]
    print(f"compacted {result['path']} from {before:,} to {after:,} bytes ({before / 2**20:.1f} MiB to "
          f"{after / 2**20:.1f} MiB): {result['nodes']} entities, {relations(result)}, {result['documents']} "
          f"documents, {result['chunks']} passages, {result['namespaces']} namespaces, as before")
    if result["kept"]:
        print("the file as it was is kept as " + " and ".join(result["kept"]) + " (open it with --db to read it; "
              "delete it once the compacted file works)")
    return 0


def _backup(services: Any, destination: Path, force: bool) -> dict[str, Any]:
    """Back the knowledge file up through the duckgraph server that holds it, else by opening it here
    (KnowledgeBase.backup does the work and the checks)."""
    source = Path(services.settings.db).expanduser()  # there: `_setup(..., existing=True)` checked
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


def _ui(args: argparse.Namespace) -> int:
    from duckgraph.core.mcp.http import check_binding
    from duckgraph.core.ui.server import new_token, page_url, serve_ui, ui_socket

    if not 0 <= args.port <= 65_535:
        print(f"duckgraph: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    from duckgraph.core import sharing

    sharing.set_command("ui")  # named in the lock file, for the messages of commands refused the file
    services = _setup(args)
    configured = services.settings.http_token
    token = args.token or (configured.get_secret_value() if configured else None)
    if args.token == "":
        token = new_token()
    check_binding(args.host, token)
    sock = ui_socket(args.host, args.port)
    port = sock.getsockname()[1]
    # A token made here is shown in the address, which sets it in the browser; a configured one is not printed.
    url = page_url(args.host, port, token if args.token is not None else None)
    guard = "token required" if token else "no token: this machine only"
    print(f"duckgraph: the web UI is at {url} ({guard}); Ctrl-C stops it", file=sys.stderr, flush=True)
    serve_ui(services, args.host, sock, token, open_url=url if args.open else None)
    from duckgraph.core.mcp.transports import _exit_now

    _exit_now(0)  # as `duckgraph serve` ends: the file is closed; skip PyTorch's slow teardown
    return 0


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
