"""A file read as text (core/files/plain_text.py: UTF-8, else why not) and a CSV or TSV file as a Markdown table
(core/files/csv_table.py), with its header at the start of every part of a long one."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain.chunking import chunk_text, keeps_lines, markdown_headings
from duckgraph.core.files.csv_table import markdown_table
from duckgraph.core.files.folder import find_files
from duckgraph.core.files.plain_text import binary, text_of
from duckgraph.ports import DuckgraphError


def test_utf8_text_is_read_with_its_line_breaks_made_newlines():
    text = text_of("Crème\r\nbrûlée\rfin\n".encode(), Path("/n/a.txt"), text_suffix=True)
    assert text == "Crème\nbrûlée\nfin\n"


@pytest.mark.parametrize(("data", "said"), [
    ("Hi there\n".encode("utf-16-be"), "it is UTF-16BE text (without a byte order mark)"),
    ("Привет, мир\n".encode("utf-16-le"), "it is UTF-16LE text (without a byte order mark)"),
    ("Hi\n".encode("utf-32"), "it is UTF-32 text (with a byte order mark)"),
])
def test_utf16_and_utf32_are_named_with_their_iconv_command(data, said):
    with pytest.raises(DuckgraphError) as caught:
        text_of(data, Path("/n/-my notes.txt"), text_suffix=True)
    assert str(caught.value).startswith(said)
    # A name that starts with "-" is no option of iconv's; one with a space is quoted.
    assert f"(f='./-my notes.txt'; iconv -f {said.split()[2]} -t UTF-8 \"$f\" > \"$f.utf8\" && mv" in str(caught.value)


def test_bytes_neither_utf8_nor_western_european_are_told_to_be_converted_from_their_encoding():
    with pytest.raises(DuckgraphError, match=r"not \(byte 0x81 at 0\): convert it from its encoding in its folder "
                                             r"\(f=a.txt; iconv -f ENCODING -t UTF-8"):
        text_of("\u3000、".encode("shift_jis"), Path("/n/a.txt"), text_suffix=True)


def test_binary_data_is_told_apart_from_utf16_text():
    png = bytes.fromhex("89504e470d0a1a0a0000000d49484452")
    assert binary(png) and binary(b"PK\x03\x04\x14\x00\x00\x00\x08\x00")
    assert not binary("Meeting".encode("utf-16-le")) and not binary(b"plain text")
    # A file of a suffix no converter reads is told a plugin can add one; a .txt is not.
    with pytest.raises(DuckgraphError, match=r"binary data \(an image, an archive...\)$"):
        text_of(png, Path("/n/a.txt"), text_suffix=True)
    with pytest.raises(DuckgraphError, match="; no converter reads .png files"):
        text_of(png, Path("/n/a.png"), text_suffix=False)


@pytest.mark.parametrize(("text", "suffix", "table"), [
    ("a\nb\n", ".csv", "| a |\n| --- |\n| b |\n"),  # one column: no delimiter to sniff
    ("x|y\n1|2\n", ".csv", "| x | y |\n| --- | --- |\n| 1 | 2 |\n"),
    ('a,b\n"1,5",2\n\n,\n3,4\n', ".csv", "| a | b |\n| --- | --- |\n| 1,5 | 2 |\n| 3 | 4 |\n"),  # no empty rows
    ("a,b\tc\n1,2\t3\n", ".tsv", "| a,b | c |\n| --- | --- |\n| 1,2 | 3 |\n"),
    ("\n\n", ".csv", ""),
])
def test_a_csv_or_tsv_is_a_markdown_table(text, suffix, table):
    assert markdown_table(text, suffix)[0] == table


def test_the_rows_of_a_long_csv_start_every_passage_and_part_under_its_header(tmp_path, monkeypatch):
    from duckgraph.core.domain import model

    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 1_500)
    rows = "".join(f"Cost center {n},{n * 7},{n * 11}\n" for n in range(200))
    (tmp_path / "costs.csv").write_text(f"center,Q1,Q2\n{rows}", encoding="utf-8")
    [file] = find_files([str(tmp_path / "costs.csv")])
    parts = [d.text for d in file.read().documents]
    header = "| center | Q1 | Q2 |\n| --- | --- | --- |\n"
    assert len(parts) > 3 and all(part.startswith(header) and len(part) <= 1_500 for part in parts)
    assert "".join(part.removeprefix(header) for part in parts) == markdown_table(f"center,Q1,Q2\n{rows}", ".csv")[0][
        len(header):]
    passages = [p for part in parts for p in chunk_text(part)]
    assert all(p.startswith(header) for p in passages)


@pytest.mark.parametrize("document_id", ["/data/budget.csv", "people.tsv", "/var/log/server.log#part-2"])
def test_data_and_log_files_keep_their_lines(document_id):
    assert keeps_lines(document_id, "", "a,b\n1,2") and not markdown_headings(document_id, "", "# 1,2")
