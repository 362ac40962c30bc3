"""What the command line refuses rather than ignore, before anything is opened or written: options a command
would not use, --namespace where a command acts on the whole file, @roots outside `serve`, a namespace named by
mistake for an export, or for ingest and import a new namespace near one the file holds (core/cli.py calls these;
they only read the parsed arguments and the file's namespaces)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from duckgraph.ports import DuckgraphError


#: The action of `communities` each of its options belongs to, and the default of those that have one.
COMMUNITY_OPTIONS = {"level": "search", "token_budget": "search", "limit": "write"}
COMMUNITY_DEFAULTS = {"token_budget": 2_000, "limit": 20}
#: `ingest --crawl`'s defaults for --depth and --max-pages.
CRAWL_DEPTH, CRAWL_PAGES = 2, 50


class UsageError(Exception):
    """A command's arguments do not go together: reported like argparse's own errors (usage, exit status 2)."""


#: The commands that act on the whole file, every namespace, and why an explicit --namespace is refused there: a
#: user who typed `backup --namespace work` would believe only `work` was copied (or, for restore, replaced).
#: DUCKGRAPH_NAMESPACE and the config file's namespace are the default of every command, so they are not refused.
WHOLE_FILE = {
    "backup": "it copies the whole file, every namespace. To save one namespace, export it: duckgraph export "
              "--namespace NAME -o FILE (read back with duckgraph import FILE). Nothing was written",
    "restore": "it puts the backup in place of the whole file, every namespace. To bring back one namespace, "
               "restore the backup into another file (duckgraph restore BACKUP --db OTHER.duckdb), export the "
               "namespace from it (duckgraph export --db OTHER.duckdb --namespace NAME -o FILE), then here empty it "
               "(duckgraph namespaces delete NAME --confirm NAME) and import the export (duckgraph import FILE). "
               "Nothing was changed",
    "compact": "it rewrites the whole file, every namespace at once (there is no compacting one namespace): "
               "run it without --namespace. Nothing was changed",
}


def refuse_ignored_options(args: argparse.Namespace) -> None:
    """Refuse, before anything is opened, an option given on the command line that this command would ignore."""
    from duckgraph.core.config import ROOTS_NAMESPACE

    if args.command in WHOLE_FILE and args.namespace is not None:
        raise UsageError(f"{args.command} takes no --namespace (given: {args.namespace!r}): {WHOLE_FILE[args.command]}")
    if args.namespace == ROOTS_NAMESPACE and args.command != "serve":
        raise UsageError(f"{args.command} takes no --namespace {ROOTS_NAMESPACE}: {ROOTS_REFUSED}; nothing was done")
    if getattr(args, "new_namespace", False) and args.namespace is None:
        raise UsageError("--new-namespace goes with --namespace NAME (it lets this command start the namespace NAME "
                         "when its name is near one the file holds); nothing was done")


#: Why every command but serve refuses --namespace @roots: only a server has a client, whose roots name it; on
#: the command line, stats took the fallback namespace quietly and export refused the name as invalid.
ROOTS_REFUSED = ("@roots is for `duckgraph serve`: the client's roots name the namespace; on the command line give "
                 "the namespace's name (`duckgraph namespaces` lists them)")


def say_roots_fallback(args: argparse.Namespace, settings: Any) -> None:
    """With the namespace setting @roots (DUCKGRAPH_NAMESPACE or the config file, shared with `serve`), a command
    that works in the default namespace uses namespace_fallback, as a client without roots does: said, not silent,
    since a user in a project's folder may expect that project's memory."""
    if not settings.from_roots or args.command in ("serve", "demo", *WHOLE_FILE) or (
            args.command == "export" and args.format != "memory-jsonl"):  # a whole-file export names none
        return
    from duckgraph.core.domain.namespaces import namespace_from_folder

    try:
        here = namespace_from_folder(Path.cwd().name)
    except OSError:  # the current folder was deleted: there is no folder to name
        here = None
    fallback = settings.namespace_fallback
    folder = f" (a client whose root is this folder uses {here!r})" if here and here != fallback else ""
    print(f"duckgraph: the namespace setting is {settings.namespace}, which only `duckgraph serve` follows (each "
          f"client's roots name its namespace): {args.command} uses the fallback namespace {fallback!r} "
          f"(namespace_fallback, DUCKGRAPH_NAMESPACE_FALLBACK); give --namespace NAME for another{folder}",
          file=sys.stderr)


def ignored_ingest_options(args: argparse.Namespace, urls: list[str]) -> str | None:
    """Why an option given to `ingest` would change nothing with the paths given (so it is refused), or None."""
    given = [flag for flag, value in (("--depth", args.depth), ("--max-pages", args.max_pages)) if value is not None]
    if given and not args.crawl:
        return (f"{' and '.join(given)} {'go' if len(given) > 1 else 'goes'} with --crawl (without it only the "
                "pages given are fetched)")
    if args.crawl and not urls:
        return "--crawl follows the links of the http(s) URLs given, and none was given"
    # Only existing files given (no folder, nor a path that is missing, which ingest reports itself): nothing to
    # prune and no folder to follow links out of.
    local = [Path(p).expanduser() for p in args.paths if p not in urls]
    files_only = all(path.exists() and not path.is_dir() for path in local)
    if args.prune and files_only and not (args.crawl and urls):
        return ("--prune deletes the documents of files gone from the folders given (with --crawl, of pages gone "
                "from a crawled site), and no folder was given" + ("" if local else " (pages given without --crawl "
                                                                             "are never pruned)"))
    if args.follow_symlinks and files_only:
        return ("--follow-symlinks follows the symbolic links inside the folders given, and no folder was given (a "
                "file given by name is read wherever it is)")
    if (args.exclude or args.include_trash) and files_only:
        return (f"{'--exclude' if args.exclude else '--include-trash'} acts on what a folder holds, and no folder was "
                "given (a file given by name is read wherever it is)")
    return None


def or_default(value: int | None, default: int) -> int:
    return default if value is None else value


def refuse_empty_namespace(args: argparse.Namespace, kb: Any) -> None:
    """Before anything is written: refuse to export a namespace named with --namespace that holds nothing (a
    mistyped or miscased name exported "successfully", then the real one deleted, loses the memory); say so, and
    export, when it is the configured default, which a new file may hold nothing in yet."""
    if args.namespace is None and args.format != "memory-jsonl":
        return  # every namespace of the file
    from duckgraph.core.domain.namespaces import namespace_hint

    namespace = kb.resolve_namespace(args.namespace)
    held = kb.store.namespaces()
    if namespace in held:
        return
    hint = namespace_hint(namespace, held)
    if args.namespace is None:
        print(f"duckgraph: the namespace {namespace!r} (the configured one) holds nothing yet: {hint}; its export "
              "holds nothing", file=sys.stderr)
        return
    raise DuckgraphError(f"the namespace {namespace!r} holds nothing: {hint}. Nothing was exported"
                         + ("" if not args.output or args.output == "-" else f" ({args.output} was not written)"))


def refuse_new_namespace(args: argparse.Namespace, kb: Any) -> None:
    """Before ingest or import writes anything into the namespace named with --namespace: when the file does not
    hold it yet (the write would start it) and its name is near one the file holds ("wrok" for "work", "Work"),
    refuse, since a typo would scatter the documents into a namespace of their own; --new-namespace starts it on
    purpose. The next of a series (proj-b beside proj-a: `same_series`) is no typo, and is started. A new namespace
    with no near name is started, and said on stderr. The configured namespace is not checked here: it is the
    server's too, and `duckgraph doctor` warns of one that holds nothing."""
    if args.namespace is None:
        return
    from duckgraph.core.domain.namespaces import meant_namespaces, namespace_hint

    namespace = kb.resolve_namespace(args.namespace)
    # Listed as `duckgraph namespaces` lists them: one whose rows were all deleted by hand is still there.
    held = {summary["namespace"] for summary in kb.store.namespace_summaries()}
    if namespace in held or not held:  # a file that holds no namespace yet has none to mistake it for
        return
    # series=False: the next of a series (proj-b beside proj-a, team-2026 beside team-2025) is started on purpose,
    # and refusing each one cost a retry with --new-namespace; a typo of a name (wrok, Work, proj_a) is still refused.
    if meant_namespaces(namespace, held, series=False) and not args.new_namespace:
        raise UsageError(f"the file holds no namespace {namespace!r} and this {args.command} would start it: "
                         f"{namespace_hint(namespace, held, series=False)}. Nothing was written; give the namespace "
                         f"meant, or --new-namespace to start {namespace!r} on purpose")
    said = "as --new-namespace asks" if args.new_namespace else namespace_hint(namespace, held, series=False)
    print(f"duckgraph: the namespace {namespace!r} is new: this {args.command} starts it ({said})", file=sys.stderr)
