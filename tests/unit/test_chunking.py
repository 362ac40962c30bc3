"""Splitting documents into passages."""

from __future__ import annotations

import random

import pytest

from duckgraph.core.domain.chunking import DEFAULT_CHUNK_CHARS, chunk_sections, chunk_text, unquoted

VOCAB = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "omicron", "sigma"]


def _document(seed: int, paragraphs: int = 6) -> str:
    """Paragraphs of sentences of numbered words: every word is unique enough to be traced."""
    rng = random.Random(seed)
    counter = iter(range(1_000_000))
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rng.randint(1, 7)):
            words = [f"{rng.choice(VOCAB)}{next(counter)}" for _ in range(rng.randint(3, 20))]
            sentences.append(" ".join(words).capitalize() + rng.choice(".!?"))
        out.append(rng.choice([" ", "  ", "\n"]).join(sentences))
    return "\n\n".join(out)


def _check_cover(text: str, chunks: list[str], max_chars: int) -> None:
    source_words = text.split()
    assert chunks, "a non-empty text gives at least one chunk"
    assert all(0 < len(c) <= max_chars for c in chunks)
    assert all(c == c.strip() for c in chunks)
    chunk_words = [w for c in chunks for w in c.split()]
    # Every word of the source appears whole in some chunk ...
    assert set(source_words) <= set(chunk_words)
    # ... and no chunk starts (or ends) with a fragment of a word.
    vocabulary = set(source_words)
    for chunk in chunks:
        words = chunk.split()
        assert words[0] in vocabulary, f"chunk starts mid-word: {chunk[:40]!r}"
        assert words[-1] in vocabulary, f"chunk ends mid-word: {chunk[-40:]!r}"
    # Chunks follow the text in order.
    positions = [text.find(c.split()[0]) for c in chunks]
    assert positions == sorted(positions)


def test_short_text_is_one_chunk() -> None:
    assert chunk_text("  Marie Curie discovered polonium.  ") == ["Marie Curie discovered polonium."]


def test_text_of_exactly_max_chars_is_one_chunk() -> None:
    text = "x" * 50
    assert chunk_text(text, max_chars=50, overlap=10) == [text]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t "])
def test_empty_text_has_no_chunks(text: str) -> None:
    assert chunk_text(text) == []


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("max_chars, overlap", [(80, 0), (200, 40), (DEFAULT_CHUNK_CHARS, 150)])
def test_long_text_chunks_are_bounded_and_cover_every_word(seed: int, max_chars: int, overlap: int) -> None:
    text = _document(seed, paragraphs=30 if max_chars == DEFAULT_CHUNK_CHARS else 6)
    assert len(text) > max_chars
    chunks = chunk_text(text, max_chars=max_chars, overlap=overlap)
    assert len(chunks) > 1
    _check_cover(text, chunks, max_chars)


def test_default_sizes_apply() -> None:
    text = _document(1, paragraphs=40)
    chunks = chunk_text(text)
    assert len(chunks) > 1
    _check_cover(text, chunks, DEFAULT_CHUNK_CHARS)


def test_cuts_prefer_paragraph_boundaries() -> None:
    para = "Word " * 15  # 75 characters with the trailing space
    paragraphs = [f"Paragraph {i}. " + para.strip() + "." for i in range(6)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, max_chars=200, overlap=0)
    # Each chunk is made of whole paragraphs: it starts a paragraph and ends one.
    for chunk in chunks:
        assert chunk.startswith("Paragraph "), chunk
        assert chunk.endswith("Word."), chunk
    assert sum(c.count("Paragraph ") for c in chunks) == 6


def test_cuts_prefer_sentence_boundaries_over_word_boundaries() -> None:
    sentences = [f"Sentence number {i} has a few more words in it." for i in range(30)]
    text = " ".join(sentences)
    chunks = chunk_text(text, max_chars=150, overlap=0)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.startswith("Sentence number"), chunk
        assert chunk.endswith("in it."), chunk


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(400))  # unique words: a word's position locates a chunk
    chunks = chunk_text(text, max_chars=100, overlap=30)
    _check_cover(text, chunks, 100)
    for previous, current in zip(chunks, chunks[1:]):
        previous_end = text.index(f" {previous.split()[-1]} ") + 1 + len(previous.split()[-1])
        current_start = text.index(f" {current.split()[0]} ") + 1
        assert current_start < previous_end, "consecutive chunks share some text"
        assert previous_end - current_start <= 30, "at most `overlap` characters are repeated"


def test_no_overlap_means_no_repeated_words() -> None:
    text = " ".join(f"w{i}" for i in range(400))
    chunks = chunk_text(text, max_chars=100, overlap=0)
    words = [w for c in chunks for w in c.split()]
    assert words == text.split()


def test_text_without_spaces_is_cut_hard_but_fully_covered() -> None:
    text = "x" * 250
    chunks = chunk_text(text, max_chars=100, overlap=0)
    assert all(len(c) <= 100 for c in chunks)
    assert "".join(chunks) == text


def test_newline_separated_words_are_not_split() -> None:
    text = "\n".join(f"line{i}" for i in range(200))
    chunks = chunk_text(text, max_chars=90, overlap=20)
    _check_cover(text, chunks, 90)


def test_the_overlap_starts_at_a_sentence_where_one_starts_within_it() -> None:
    sentences = [f"Sentence {i} says that work on part {i} is needed." for i in range(40)]
    chunks = chunk_text(" ".join(sentences), max_chars=200, overlap=60)
    assert len(chunks) > 5
    # Cut at sentence ends, the next passage repeats the last sentence whole (it is shorter than the overlap),
    # not its last words ("part 3 is needed."), which began passages mid-sentence.
    for previous, current in zip(chunks, chunks[1:]):
        assert current.startswith("Sentence "), current
        assert previous.endswith(current.split(" is needed. ", 1)[0] + " is needed."), (previous, current)


def test_the_overlap_starts_at_a_line_where_one_starts_within_it() -> None:
    lines = [f"step {i}: check the valve and log the pressure" for i in range(30)]
    chunks = chunk_text("\n".join(lines), max_chars=150, overlap=60)
    assert all(chunk.startswith("step ") for chunk in chunks), chunks


TABLE_HEAD = "| Station ID | Location | Commissioned | Sensor |\n|---|:---|---:|---|"
TABLE_ROWS = [f"| ST-{i:04d} | Site {i}. See note {i} | {1990 + i % 30} | Lufft WS600 |" for i in range(1, 121)]


@pytest.mark.parametrize("max_chars, overlap", [(300, 0), (1000, 150), (400, 60)])
def test_a_long_table_is_cut_between_rows_and_each_passage_repeats_its_header(max_chars: int, overlap: int) -> None:
    text = "Stations of the network.\n\n" + TABLE_HEAD + "\n" + "\n".join(TABLE_ROWS) + "\n\nAll were inspected in 2024."
    chunks = chunk_text(text, max_chars=max_chars, overlap=overlap)
    assert len(chunks) > 3 and all(len(chunk) <= max_chars for chunk in chunks)
    held = [line for chunk in chunks for line in chunk.splitlines()]
    assert set(TABLE_ROWS) <= set(held)
    for chunk in chunks:
        rows = [line for line in chunk.splitlines() if line.startswith("| ST-")]
        # Whole rows only, never a piece of one ("Lufft WS600 | ..." began a passage).
        assert all(row in TABLE_ROWS for row in rows), chunk
        if rows:
            assert chunk.startswith(TABLE_HEAD + "\n") or chunk.startswith("Stations"), chunk
    assert chunks[0].startswith("Stations of the network.\n\n" + TABLE_HEAD)
    assert chunks[-1].endswith("All were inspected in 2024.")


def test_a_table_row_longer_than_a_passage_is_still_cut_and_kept() -> None:
    rows = [f"| r{i} | " + " ".join(f"w{i}x{j}" for j in range(60)) + " |" for i in range(4)]
    text = "| id | words |\n|---|---|\n" + "\n".join(rows)
    chunks = chunk_text(text, max_chars=200, overlap=0)
    assert all(len(chunk) <= 200 and chunk.startswith("| id | words |\n|---|---|\n") for chunk in chunks[1:])
    # Cut inside a row only at a word boundary, each piece below the header.
    assert [w for chunk in chunks for w in chunk.split()[6 if chunk is not chunks[0] else 0:]] == text.split()


def test_pipes_in_prose_or_in_a_code_block_make_no_table() -> None:
    rows = "\n".join(f"| {i} | {i * i} |" for i in range(40))
    text = f"```\n| a | b |\n|---|---|\n{rows}\n```\nUse a | b to pipe. " + "Words follow here. " * 30
    assert chunk_text(text, max_chars=200, overlap=0) == [
        chunk.replace("/", "|") for chunk in chunk_text(text.replace("|", "/"), max_chars=200, overlap=0)]


SIGNATURE = ("--\nSarah Kim\nDirector of Operations | Northwind Traders\n\nCONFIDENTIALITY NOTICE: This e-mail "
             "message is for the sole use of the intended recipient(s).")


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.split("\n"))


def test_a_reply_s_own_words_its_signature_and_each_quoted_message_are_passages_of_their_own() -> None:
    """A reply that quotes the thread below it, as mail programs write it: its own words, its signature (from the
    "-- " line) and each quoted message (from its attribution line, one level deeper each) are separate passages,
    though the whole fits in one; the lines of nothing but quote markers between them are left out, no other."""
    first = "Hi all,\n\nThe move date is Saturday, December 12.\n\n" + SIGNATURE
    second = ("Who handles the server rack?\n\nOn Tue, Nov 10, 2026 at 09:02 Sarah Kim <sarah.kim@northwind.example>"
              "\nwrote:\n" + _quoted(first))  # an attribution wrapped by the mail program
    reply = ("Update: the move slips to Tuesday December 15.\n\n" + SIGNATURE
             + "\n\nOn Tue, Nov 10, 2026 at 11:40 Alex Rivera wrote:\n" + _quoted(second))
    assert len(reply) < DEFAULT_CHUNK_CHARS
    assert [passage for _, passage in chunk_sections(reply)] == [
        "Update: the move slips to Tuesday December 15.",
        SIGNATURE,
        "On Tue, Nov 10, 2026 at 11:40 Alex Rivera wrote:\n> Who handles the server rack?",
        "> On Tue, Nov 10, 2026 at 09:02 Sarah Kim <sarah.kim@northwind.example>\n> wrote:\n> > Hi all,\n>"
        " >\n> > The move date is Saturday, December 12.",
        _quoted(_quoted(SIGNATURE)),
    ]


@pytest.mark.parametrize("separator", ["-----Original Message-----", "---------- Forwarded message ---------",
                                       None])
def test_an_outlook_quote_or_a_forwarded_message_starts_a_passage(separator: str | None) -> None:
    """Outlook and forwarding quote a message under its header block ("From:" then "Sent:" or "Date:"), without
    quote markers, below a separator line or not: the reply's own words are a passage of their own."""
    header = "From: Sarah Kim <sarah.kim@northwind.example>\nSent: Tuesday, March 3, 2026 10:02 AM\nSubject: Move"
    quote = f"{separator}\n{header}" if separator else header
    text = f"Agreed, Thursday works.\n\n{quote}\n\nThe move date is Saturday, December 12."
    assert [passage for _, passage in chunk_sections(text)] == [
        "Agreed, Thursday works.", f"{quote}\n\nThe move date is Saturday, December 12."]


def test_quote_markers_and_dashes_that_are_no_email_stay_in_their_passage() -> None:
    """A ">>>" prompt right below its output (a Python session), ">" and "--" lines in a fenced code block or a
    code file, a header-like "From:" line alone: one passage each, as before."""
    prompt = "The session:\n>>> 1 + 1\n2\n>>> len('ab')\n2"
    fenced = "Run this:\n\n```\n$ cat notes\n> first line\n--\n```\n\nThen restart."
    sql = "SELECT 1;\n\n> not a quote\n--\n-- a comment\nSELECT 2;"
    header = "Trip plan.\n\nFrom: Boston\nTo: Seattle"
    for text in (prompt, fenced, header):
        assert [passage for _, passage in chunk_sections(text)] == [text]
    assert [passage for _, passage in chunk_sections(sql, headings=False)] == [sql]


def test_unquoted_reads_a_quote_as_the_words_it_quotes() -> None:
    assert unquoted("On Tue, Nov 10, 2026 at 09:02 Sarah Kim wrote:\n> > Hi all,\n> >\n>>  The move is   on\n"
                    "-----Original Message-----\n> Saturday.") == "Hi all, The move is on Saturday."


def test_an_email_s_attachments_list_is_no_part_of_its_signature() -> None:
    """The email converter lists the attached files below the message's text: below a signature they were read as
    part of it (a passage search sets aside for the message's own words); they are a passage of their own. Below
    the message's own words, with no signature between, they stay with them."""
    attachments = "Attachments:\n- Q4-budget.xlsx (application/vnd.ms-excel, 5.0 KB)"
    words = "Hi,\n\nCould you please update the Q4 budget deck?"
    assert [passage for _, passage in chunk_sections(f"{words}\n\n{SIGNATURE}\n\n{attachments}")] == [
        words, SIGNATURE, attachments]
    assert [passage for _, passage in chunk_sections(f"{words}\n\n{attachments}")] == [f"{words}\n\n{attachments}"]
