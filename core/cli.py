"""The `duckgraph` command line."""

from __future__ import annotations

import argparse
import json
import os
import shlex
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
    or_default,
    refuse_ignored_options,
)
# The shared start of every command lives beside the command modules, which must not import this one.
from duckgraph.core.commands.common import settings as _settings
from duckgraph.core.commands.common import setup as _setup
from duckgraph.core.commands.files import (
    backup_command,
    compact_command,
    export_command,
    import_command,
    restore_command,
)
from duckgraph.core.commands.ingest import ingest_command
from duckgraph.core.interrupts import say_interrupted, sigterm_as_interrupt, stopped_by
from duckgraph.core.terminal import ProgressBar, for_stream
from duckgraph.ports import DuckgraphError


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
        # The page forwards to the server, so it can do what that client's tool set may lack (delete documents).
        "serve": f"a duckgraph MCP server (`duckgraph serve`, pid {pid}, which an MCP client started): use the "
                 "memory through that client or `duckgraph ui` (which works beside it), or stop it",
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
                                                             "Markdown, PDF, HTML, DOCX, PPTX, EPUB, email (again: "
                                                             "changed ones replaced, unchanged skipped)")
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
    ingest.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                        help="leave out of the folders given the files and folders PATTERN matches, a glob against "
                             "the path inside the folder (.trash, Archive/2019, '*.excalidraw.md'; repeatable); with "
                             "--prune, what was stored of them is deleted")
    ingest.add_argument("--include-trash", action="store_true",
                        help="also read the folders where notes apps keep deleted notes and old copies, left out by "
                             "default (.trash, logseq/.recycle, logseq/bak, a drive's .Trash-*: docs/ingest.md)")
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
    ingest.set_defaults(run=ingest_command)

    search = sub.add_parser("search", parents=[common], help="anchor & expand search", free_text="the query")
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
                        help="the facts valid then, and no passages of documents timed after it (ISO date or "
                             "date-time, UTC; without it, the facts valid now and passages of any time)")
    search.add_argument("--include-history", action="store_true", help="add the facts that had ended by then")
    search.add_argument("--after", type=_moment, metavar="WHEN",
                        help="a window's start: only the facts valid, and passages of documents timed, within it")
    search.add_argument("--before", type=_moment, metavar="WHEN", help="the window's end (see --after)")
    search.set_defaults(run=_search)

    changes = sub.add_parser("changes", parents=[common], help="what was written, newest first (entities, facts "
                             "added or ended, documents, and what was deleted or replaced); or forget the record "
                             "of what was deleted or changed")
    changes.add_argument("action", nargs="?", choices=["list", "forget"], default="list",
                         help="list (the default), or forget: delete for good the namespace's record of what was "
                              "deleted, merged, replaced or changed (the lines that keep texts the memory no longer "
                              "holds), all of it or that of --since/--until")
    changes.add_argument("--since", type=_moment, metavar="WHEN", help="from this ISO date or date-time (UTC)")
    changes.add_argument("--until", type=_moment, metavar="WHEN", help="before this ISO date or date-time (UTC)")
    # No defaults here (50 and 0 apply): they go with list, and are refused with forget.
    changes.add_argument("--limit", type=int, metavar="N", help="list: the most changes to list (default 50)")
    changes.add_argument("--offset", type=int, metavar="N",
                         help="list: skip this many changes, newest first (next_offset of a listing cut at --limit)")
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

    documents = sub.add_parser("documents", parents=[common], free_text="a document id",
                               help="read a document's passages in order, or delete documents stored by mistake, by id")
    documents.add_argument("action", choices=["show", "delete"],
                           help="show: one document's passages in order, around --around or from its start, as the "
                                "read_document tool shows them; delete: the documents, their passages, and the "
                                "entities and relations only they supported, for good")
    documents.add_argument("ids", nargs="+", metavar="ID",
                           help="document ids, as search shows them (a passage's document_id)")
    # No defaults here (document_reading's BEFORE and AFTER apply): they go with show, and are refused with delete.
    documents.add_argument("--around", type=int, metavar="CHUNK_ID",
                           help="show: the passage to read around, its chunk_id (search shows [document_id#chunk_id])")
    documents.add_argument("--before", type=int, metavar="N", help="show: passages before it (default 2)")
    documents.add_argument("--after", type=int, metavar="N",
                           help="show: passages after it, or after the first without --around (default 5)")
    documents.add_argument("--json", action="store_true", help="print the result as JSON")
    documents.set_defaults(run=_documents)

    communities = sub.add_parser("communities", parents=[common], free_text="the query",
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
    export.set_defaults(run=export_command)

    imp = sub.add_parser("import", parents=[common],
                         help="read a duckgraph export or a memory server memory.jsonl into the database (with "
                              "--namespace: all of it into that namespace)")
    imp.add_argument("file", metavar="FILE", help="the JSON Lines file ('-' for standard input)")
    imp.add_argument("--re-embed", dest="reembed", action="store_true",
                     help="ignore the vectors in the file and compute them with the configured embedder")
    imp.add_argument("--allow-incomplete", action="store_true",
                     help="import what a duckgraph export holds though it was cut short (no end line) or lacks "
                          "lines its end line counts, rather than refuse it")
    imp.add_argument("--json", action="store_true", help="print the summary as JSON")
    imp.add_argument("--new-namespace", action="store_true", help=NEW_NAMESPACE_HELP)
    imp.set_defaults(run=import_command)

    backup = sub.add_parser("backup", parents=[whole_file],
                            help="write a consistent copy of the database file (also while a server uses it)")
    backup.add_argument("path", metavar="PATH", help="the file to write; the copy opens directly with --db PATH")
    backup.add_argument("--force", action="store_true", help="replace PATH if it exists")
    backup.add_argument("--json", action="store_true", help="print the result as JSON")
    backup.set_defaults(run=backup_command)

    restore = sub.add_parser("restore", parents=[whole_file],
                             help="put a backup in place of the database file (stop its servers first); the file it "
                                  "replaces and its write-ahead log are kept aside")
    restore.add_argument("backup", metavar="BACKUP", help="the backup to restore (a file `duckgraph backup` wrote)")
    restore.add_argument("--json", action="store_true", help="print the result as JSON")
    restore.set_defaults(run=restore_command)

    compact = sub.add_parser("compact", parents=[whole_file],
                             help="rewrite the database file without the free blocks that deleted and replaced rows "
                                  "left (stop its servers first); the counts are checked before it replaces the file")
    compact.add_argument("--keep-old", action="store_true",
                         help="keep the file as it was, as PATH.before-compact-TIME (default: removed, in the same "
                              "step that puts the checked compact file in its place)")
    compact.add_argument("--json", action="store_true", help="print the result as JSON")
    compact.set_defaults(run=compact_command)

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
    option follows the one before it, and then refuses the text after the option as unrecognized.

    `free_text` names what its positional takes ("the query"), for a command whose text may start with "-": argparse
    reads "-Xmx4g" as an option, and the error then says how to give it as text (after "--")."""

    _intermixing = False

    def __init__(self, *args: Any, free_text: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.free_text = free_text
        self._given: list[str] = []

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        # parse_known_intermixed_args calls parse_known_args twice (options, then positionals): those calls parse.
        if self._intermixing:
            return super().parse_known_args(args, namespace)
        self._given = list(sys.argv[1:] if args is None else args)
        # After "--" everything is positional, which the intermixed parse forgets (Python 3.11): parsed plainly,
        # the options before "--" first, so that none comes between an action and its optional positional.
        if "--" in self._given:
            return super().parse_known_args(self._options_first(self._given), namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _options_first(self, args: list[str]) -> list[str]:
        """`args` with the options before "--" (and their values) moved ahead of the positionals there."""
        cut = args.index("--")
        options: list[str] = []
        positionals: list[str] = []
        head = iter(args[:cut])
        for arg in head:
            action = self._option_string_actions.get(arg)
            if action is None:  # a positional, or an option with its value after "=", or an unknown one
                (options if arg.startswith("-") and arg != "-" else positionals).append(arg)
                continue
            options.append(arg)
            if action.nargs != 0 and (value := next(head, None)) is not None:
                options.append(value)
        return [*options, *positionals, *args[cut:]]

    def error(self, message: str):  # type: ignore[override]
        """Exit 2 with the usage and `message`, and, where a text argument starting with "-" was taken for an option,
        how to give it."""
        super().error(message + self._dash_hint(message))

    def _dash_hint(self, message: str) -> str:
        if self.free_text is None or not message.startswith(("the following arguments are required",
                                                             "unrecognized arguments")):
            return ""
        cut = self._given.index("--") if "--" in self._given else len(self._given)
        dashed = [arg for arg in self._given[:cut] if arg.startswith("-") and arg != "-"
                  and arg.split("=", 1)[0] not in self._option_string_actions]
        if not dashed:
            return ""
        # Everything after "--" is text: the options stay before it, with the command's other words.
        rest = [arg for arg in self._given[:cut] if arg not in dashed]
        example = " ".join(map(shlex.quote, [*rest, "--", *dashed, *self._given[cut + 1:]]))
        return (f"; {dashed[0]!r} starts with '-' and was read as an option: to give it as {self.free_text}, put -- "
                f"before it, after the options ({self.prog} {example})")


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
    if args.action == "forget":
        return _forget_changes(args)
    _numbers(args, {"limit": "recent_changes"})
    with _setup(args, existing=True).knowledge_base as kb:
        result = kb.recent_changes(since=args.since, until=args.until, limit=or_default(args.limit, 50),
                                   offset=or_default(args.offset, 0), token_budget=10**9)
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(result.text, sys.stdout))
    return 0


def _forget_changes(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.history import forget_changes
    from duckgraph.core.domain.namespaces import empty_namespace_hint

    given = [flag for flag, value in (("--limit", args.limit), ("--offset", args.offset)) if value is not None]
    if given:
        raise UsageError(f"changes forget takes no {' or '.join(given)}: it forgets every line of the span "
                         "(--since, --until) or of the namespace; nothing was forgotten")
    with _setup(args, existing=True).knowledge_base as kb:
        forgotten = forget_changes(kb, kb.namespace, since=args.since, until=args.until)
        hint = None if forgotten else empty_namespace_hint(kb, kb.namespace)
    if args.json:
        print(json.dumps({"namespace": kb.namespace, "forgotten": forgotten}, indent=2))
    else:
        print(f"forgot {forgotten} line{'' if forgotten == 1 else 's'} of the record of what was deleted or changed "
              f"in the namespace {kb.namespace!r}" + ("; their texts stay in the file's free blocks until "
                                                       "`duckgraph compact`" if forgotten else ""))
    if hint:
        print(f"duckgraph: {hint}", file=sys.stderr)
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

    if args.action == "show":
        return _show_document(args)
    given = [flag for flag in ("--around", "--before", "--after") if getattr(args, flag[2:]) is not None]
    if given:
        raise UsageError(f"documents delete takes no {' or '.join(given)}: they go with show; nothing was deleted")
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


def _show_document(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.document_reading import AFTER, BEFORE, read_document

    if len(args.ids) > 1:
        raise UsageError(f"documents show takes one ID, not {len(args.ids)}: it reads one document")
    numbers = _numbers(args, {"before": "read_document", "after": "read_document"})

    def read_on(document_id: str, chunk_id: int | None, zero: str | None) -> str:
        around = f" --around {chunk_id}" if chunk_id is not None else ""
        return f"duckgraph documents show {shlex.quote(document_id)}{around}{f' --{zero} 0' if zero else ''}"

    with _setup(args, existing=True).knowledge_base as kb:
        result = read_document(kb, args.ids[0], kb.namespace, chunk_id=args.around,
                               before=numbers.get("before", BEFORE), after=numbers.get("after", AFTER),
                               read_on=read_on, name_other_namespaces=True)
    # Stored texts may hold terminal escape sequences: shown escaped on a terminal (JSON escapes them itself).
    print(for_stream(result.model_dump_json(indent=2), sys.stdout, json=True) if args.json
          else for_stream(result.text, sys.stdout))
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


def _ui(args: argparse.Namespace) -> int:
    from duckgraph.core.mcp.http import check_binding
    from duckgraph.core.ui.server import new_token, page_url, serve_ui, ui_socket

    if not 0 <= args.port <= 65_535:
        print(f"duckgraph: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    from duckgraph.core import sharing

    sharing.set_command("ui")  # named in the lock file, for the messages of commands refused the file
    services = _setup(args)
    sharing.check_lock_file(services.settings.db)  # another user's lock file ends the UI: refuse before the address
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
