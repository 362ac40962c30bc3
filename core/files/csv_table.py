"""A CSV or TSV file as a Markdown table: its first row the header, then the delimiter line, then a line a row.

Chunking (core/domain/chunking.py) cuts a Markdown table between its rows and starts each passage of it with its
header, so that a row found in the middle of the file still says which column each value is in ("| Travel | 8000
| 9500 | 14250 | 7000 |" below "| category | Q1 | Q2 | Q3 | Q4 |"); read as prose, every passage after the first
was numbers without names. A CSV's delimiter is sniffed among the comma, the semicolon (Excel's in much of
Europe, where the comma is the decimal mark), the tab and the bar; a TSV's is the tab. Quoting is the standard
one (RFC 4180: a cell in double quotes may hold the delimiter, line breaks, and a quote written twice)."""

from __future__ import annotations

import csv
import io

from duckgraph.ports import DuckgraphError

#: The suffixes read as tables, each with its delimiter (None: sniffed).
TABLE_SUFFIXES = {".csv": None, ".tsv": "\t"}
_SNIFFED = ",;\t|"
#: What the delimiter is sniffed from.
_SAMPLE = 64 * 1024


def markdown_table(text: str, suffix: str) -> tuple[str, str]:
    """(the table, its header and delimiter lines) of the CSV or TSV `text` (its suffix one of TABLE_SUFFIXES); ("",
    "") when it holds no row. Rows with no text are left out; a cell's line breaks become spaces, and a bar in it is
    escaped (`\\|`), so that a row is a line and its cells are where the header says."""
    delimiter = TABLE_SUFFIXES[suffix] or _sniffed(text[:_SAMPLE])
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
                if any(cell.strip() for cell in row)]
    except csv.Error as exc:  # a cell longer than the csv module takes, an unclosed quote at the end...
        raise DuckgraphError(f"not a readable {suffix[1:].upper()} file ({exc})") from exc
    if not rows:
        return "", ""
    header, *body = rows
    head = f"{_line(header)}\n|{' --- |' * len(header)}\n"
    return head + "".join(f"{_line(row)}\n" for row in body), head


def _sniffed(sample: str) -> str:
    """The delimiter of a CSV file; the comma, CSV's own, when sniffing finds none (a table of one column)."""
    try:
        return csv.Sniffer().sniff(sample, delimiters=_SNIFFED).delimiter
    except csv.Error:
        return ","


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|") for cell in cells) + " |"
