"""`duckgraph ingest`: files, folders and web pages stored as documents, and what it says of them."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from duckgraph.core.cli_checks import CRAWL_DEPTH, CRAWL_PAGES, ignored_ingest_options, or_default, refuse_new_namespace
from duckgraph.core.commands.common import setup
from duckgraph.core.files.new_file import NewFile, holds_nothing
from duckgraph.core.interrupts import exit_status, how, stopped_by
from duckgraph.core.terminal import ProgressBar, for_stream
from duckgraph.ports import ConfigError, DuckgraphError, interruption


def ingest_command(args: argparse.Namespace) -> int:
    from duckgraph.core.domain.ingest import refuse_read_only
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS
    from duckgraph.core.files import folder

    if (args.depth is not None and args.depth < 0) or (args.max_pages is not None and args.max_pages < 1):
        print("duckgraph: --depth must be 0 or more and --max-pages 1 or more", file=sys.stderr)
        return 2
    if args.prune_empty and not args.prune:
        print("duckgraph: --prune-empty goes with --prune", file=sys.stderr)
        return 2
    urls = [p for p in args.paths if "://" in p]
    unfit = [why for why in map(folder.unfit_pattern, args.exclude) if why]
    if refused := ignored_ingest_options(args, urls) or (unfit[0] if unfit else None):
        print(f"duckgraph: {refused}; nothing was read", file=sys.stderr)
        return 2
    services = setup(args)
    if args.extract and services.knowledge_base.extractor is None:
        raise ConfigError("--extract needs an extractor and none is configured: configure one (DUCKGRAPH_EXTRACTOR="
                          "ollama, or an [extractor] section in the config file; see docs/ollama.md), or run without "
                          "--extract to store the documents only; nothing was read")
    fetching = services.url_fetching
    paths = [p for p in args.paths if p not in urls]
    left_out: dict[Path, str] = {}
    files = folder.find_files(paths, follow_symlinks=args.follow_symlinks, converters=fetching.converters.by_suffix,
                              exclude=[*(() if args.include_trash else folder.TRASH), *args.exclude], left_out=left_out)
    _say_trash([path for path, pattern in left_out.items() if pattern in folder.TRASH and pattern not in args.exclude])
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
        _say_unsupported([(os.fsencode(f.path).decode("utf-8", "backslashreplace"), f.unsupported, f.binary)
                          for f in files])
        return 1
    extract = services.knowledge_base.extractor is not None if args.extract is None else args.extract
    bar = ProgressBar()
    try:
        # Opened before any page is fetched, and kept open for the ingest below, so that a namespace named by
        # mistake is refused first. A file not there yet holds no namespace to mistake it for: it is created by
        # the ingest's first write, as before (not here, where a failed fetch would leave it empty).
        if Path(services.settings.db).expanduser().exists():
            # A read-only file is refused before anything is fetched, converted or embedded (minutes, for a folder).
            refuse_read_only(services.knowledge_base.open())
            refuse_new_namespace(args, services.knowledge_base)
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
        unsupported = {path for path, _, _ in report.unsupported}  # said by suffix, below
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
            summary += (f"; pruned {len(report.pruned)} documents of files gone{' or left out' if left_out else ''}, "
                        f"with {report.nodes_pruned} entities and {report.edges_pruned} relations only they supported")
            if report.prune_kept:
                summary += (f"; kept {len(report.prune_kept)} documents of files that are there but were not read "
                            "this time")
        if extract:
            already = sum(1 for e in extractions if e.skipped)
            summary += f", {sum(1 for e in extractions if not e.error and not e.skipped)} passages extracted"
            summary += (f" ({already} had been already)" if already else "") + f", {failed} failed"
        print(summary, file=sys.stderr if args.json else sys.stdout)
        if args.json:
            summary_json = _ingest_summary(report, pruned=pruned, extract=extract, left_out=left_out)
            print(for_stream(json.dumps({"summary": summary_json}), sys.stdout, json=True))
        return 1 if failed or report.partly else 0

    report = folder.IngestReport()
    ingested = False  # every file stored: what stops it then stops only the file's closing
    created = NewFile(Path(services.settings.db).expanduser())  # not opened yet when new (above)
    opened = left_empty = False
    try:
        with services.knowledge_base as kb:
            opened = True
            try:
                folder.ingest(kb, files, extract=extract, prune=prune, excluded=list(left_out),
                              progress=bar.update, label=lambda text: setattr(bar, "label", text),
                              on_batch=batch_done, report=report)
            except BaseException:
                # Asked of the file, not of the report: a batch's documents are stored before its extraction,
                # which may be what failed.
                left_empty = created.new and holds_nothing(kb)
                raise
            ingested = True
            left_empty = created.new and holds_nothing(kb)  # every file skipped: no memory to keep
    except (Exception, KeyboardInterrupt) as exc:
        bar.finish()
        # A file this command created and left empty is removed, as a failed import's is (files.py `import_command`).
        interrupted_open = created.new and not opened and interruption(exc) is not None
        said = created.remove() if left_empty or interrupted_open else None
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
    code = summarize(report, stopped=False)
    if left_empty:
        print(for_stream(f"duckgraph: nothing was stored, so {created.remove()}", sys.stderr), file=sys.stderr)
    return code


def _say_trash(left_out: list[Path]) -> None:
    """The trash folders (folder.TRASH) a walk left out, on one line that says how to read them."""
    if left_out:
        shown = ", ".join(str(path) for path in left_out[:3]) + (f" and {len(left_out) - 3} more"
                                                                 if len(left_out) > 3 else "")
        print(for_stream(f"duckgraph: left out {shown}: where notes apps keep deleted notes and old copies (with "
                         "--prune, what was stored of them is deleted); give --include-trash to read them",
                         sys.stderr), file=sys.stderr)


def _say_unsupported(unsupported: list[tuple[str, str, bool]]) -> None:
    """The files in the folders given that no converter reads, on one line per suffix (a folder of photos beside
    the notes would otherwise bury the other lines), each named at INFO; the binary ones (photos) on their own
    line, which does not tell to read them as text."""
    from duckgraph.core.files.folder import NO_SUFFIX
    by_suffix: dict[tuple[str, bool], list[str]] = {}
    for path, suffix, binary in unsupported:
        by_suffix.setdefault((suffix, binary), []).append(path)
        logging.getLogger("duckgraph.ingest").info("skipped %s: no converter reads its suffix (%s)", path, suffix)
    for (suffix, binary), paths in sorted(by_suffix.items()):
        shown = ", ".join(paths[:3])
        if len(paths) > 3:
            shown += f" and {len(paths) - 3} more (--log-level INFO names them all)"
        what = "without a suffix" if suffix == NO_SUFFIX else f"with the suffix {suffix}"
        advice = "" if binary else "; to read a file as text, give it by name: duckgraph ingest FILE"
        print(for_stream(f"duckgraph: skipped {len(paths)} {'file' if len(paths) == 1 else 'files'} {what}, "
                         f"which no converter reads (a plugin can add one: docs/plugins.md{advice}): {shown}",
                         sys.stderr), file=sys.stderr)


def _ingest_summary(report: Any, *, pruned: bool, extract: bool,
                    left_out: dict[Path, str]) -> dict[str, Any]:
    """`ingest --json`'s last object: the summary line's numbers, with the files skipped (and why), those left out
    (and the pattern that matched) and the documents pruned and kept by path."""
    extractions = [e for r in report.results for e in r.extractions]
    summary: dict[str, Any] = {
        "stored": len(report.stored), "replaced": len(report.replaced), "unchanged": len(report.unchanged),
        "passages": sum(r.chunks_written for r in report.results),
        "skipped": [{"path": path, "why": why} for path, why in report.skipped],
        "partly": [{"path": path, "what": what} for path, what in report.partly],
        "split": dict(report.split), "emptied": list(report.emptied),
        "left_out": [{"path": str(path), "pattern": pattern} for path, pattern in left_out.items()],
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
