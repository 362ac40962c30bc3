"""The commands that write or replace whole files: `export` and `import` (JSON Lines), `backup`, `restore` and
`compact` (the database file)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from duckgraph.core.cli_checks import UsageError, refuse_empty_namespace, refuse_new_namespace
from duckgraph.core.commands.common import settings, setup
from duckgraph.core.files.new_file import NewFile
from duckgraph.core.terminal import ProgressBar, for_stream, utf8_stdin, utf8_stdout
from duckgraph.ports import DuckgraphError, interruption


def export_command(args: argparse.Namespace) -> int:
    from duckgraph.core.files.export import export_jsonl, write_file
    from duckgraph.core.files.memory_jsonl import export_memory_jsonl

    if args.format == "memory-jsonl" and args.embeddings:
        raise UsageError("--embeddings has no place in a memory-jsonl file: leave it out, or use --format duckgraph; "
                         "nothing was written")

    def write(kb, out):
        if args.format == "memory-jsonl":
            return export_memory_jsonl(kb, out)
        return export_jsonl(kb, out, embeddings=args.embeddings, namespace=args.namespace)

    services = setup(args, existing=True)
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


def import_command(args: argparse.Namespace) -> int:
    services = setup(args)
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
    if summary.completeness:  # an export whose end line is missing (an older one), or imported incomplete
        print(f"duckgraph: {summary.completeness}", file=sys.stderr)
    for name in summary.placeholders:
        print(f"duckgraph: created {name!r} as an entity of type 'unknown': a relation names it, and neither the "
              "file nor the knowledge base has such an entity", file=sys.stderr)
    for reason in summary.partly_imported:
        print(f"duckgraph: imported in part {reason}", file=sys.stderr)
    for reason in summary.homonyms_merged:
        print(f"duckgraph: {reason}", file=sys.stderr)
    if summary.documents_values_replaced:  # the same id: the file's document replaced the stored one
        count = summary.documents_values_replaced
        more = count - len(summary.documents_replaced)
        print(f"duckgraph: {count} stored {'document was' if count == 1 else 'documents were'} replaced by the "
              f"file's of the same id: {', '.join(summary.documents_replaced)}{f' and {more} more' if more else ''}",
              file=sys.stderr)
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
                                   namespace=args.namespace, allow_incomplete=args.allow_incomplete)
        except UnicodeDecodeError as exc:  # raised inside the import's transaction: rolled back, nothing kept
            raise DuckgraphError(f"standard input is not UTF-8 text ({exc}); nothing was imported: JSON Lines "
                                 "are read as UTF-8 whatever the locale, convert it first (iconv -t UTF-8)"
                                 ) from exc
        finally:
            if stdin is not sys.stdin:
                stdin.detach()
    else:
        summary = import_file(kb, args.file, reembed=args.reembed, progress=bar.update, namespace=args.namespace,
                              allow_incomplete=args.allow_incomplete)
    return summary


def backup_command(args: argparse.Namespace) -> int:
    services = setup(args, existing=True)
    # Relative to where the command runs, whichever process ends up writing the copy.
    destination = Path(args.path).expanduser().absolute()
    result = _backup(services, destination, args.force)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from duckgraph.core.files.backup import relations

        print(for_stream(f"backed up {services.settings.db} to {result['path']} ({result['bytes']:,} bytes): "
                         f"{result['nodes']} entities, {relations(result)}, {result['documents']} documents, "
                         f"{result['chunks']} passages", sys.stdout))
    return 0


def restore_command(args: argparse.Namespace) -> int:
    from duckgraph.core.files.backup import counts, relations, restore

    db = Path(settings(args).db).expanduser()

    def check(copy: Path) -> dict[str, int]:
        """Open the copy as the knowledge file will be opened: a backup that does not open is refused."""
        with setup(args, db=str(copy)).knowledge_base as kb:
            return counts(kb)

    result = restore(args.backup, db, check)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(for_stream(f"restored {result['path']} from {result['backup']} ({result['bytes']:,} bytes): "
                     f"{result['nodes']} entities, {relations(result)}, {result['documents']} documents, "
                     f"{result['chunks']} passages", sys.stdout))
    if result["kept"]:
        print(for_stream("the file it replaced is kept as " + " and ".join(result["kept"]) + " (open it with --db to "
                         "read it)", sys.stdout))
    return 0


def compact_command(args: argparse.Namespace) -> int:
    from duckgraph.core.files.backup import compact, relations

    db = Path(setup(args, existing=True).settings.db).expanduser()  # a missing file is said as other commands say it
    # The file and its copy are each opened as the knowledge file is: a copy that does not open is refused.
    result = compact(db, lambda path: setup(args, db=str(path)).knowledge_base, keep_old=args.keep_old)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    before, after = result["bytes_before"], result["bytes"]
    print(for_stream(f"compacted {result['path']} from {before:,} to {after:,} bytes ({before / 2**20:.1f} MiB to "
                     f"{after / 2**20:.1f} MiB): {result['nodes']} entities, {relations(result)}, "
                     f"{result['documents']} documents, {result['chunks']} passages, {result['namespaces']} "
                     "namespaces, as before", sys.stdout))
    if result["kept"]:
        print(for_stream("the file as it was is kept as " + " and ".join(result["kept"]) + " (open it with --db to "
                         "read it; delete it once the compacted file works)", sys.stdout))
    return 0


def _backup(services: Any, destination: Path, force: bool) -> dict[str, Any]:
    """Back the knowledge file up through the duckgraph server that holds it, else by opening it here
    (KnowledgeBase.backup does the work and the checks)."""
    source = Path(services.settings.db).expanduser()  # there: `setup(..., existing=True)` checked
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
