"""Third-party converters that misbehave (core/files/converters.py): one that cannot be built, or names a suffix
that is not one, is reported and costs only the files of its suffixes; any exception or a result of the wrong
shape is a ConversionError naming the converter; suffixes may have several parts; two converters naming one suffix
are resolved by a documented rule, whatever order the plugins load in, and the clash is reported. A page served as
application/octet-stream is read by the converter of its URL's suffix."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from duckgraph.core.files.converters import converter_overview, load_converters
from duckgraph.core.files.folder import find_files
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.core.web.crawl import page_documents
from duckgraph.core.web.fetch import Response
from duckgraph.ports import DuckgraphError, hookimpl
from duckgraph.ports.converter import ConversionError, ConvertedDocument, DocumentConverter


class Todo(DocumentConverter):
    suffixes = (".todo",)
    media_types = ("text/x-todo",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        return ConvertedDocument(text="TODO " + data.decode(), title=Path(name).stem)


class OtherTodo(Todo):
    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        return ConvertedDocument(text="OTHER " + data.decode(), title="other")


class TodoTxt(Todo):
    suffixes = (".todo.txt",)
    media_types = ()


class Boom(Todo):
    suffixes = (".boom",)
    media_types = ()

    def __init__(self) -> None:
        raise RuntimeError("converter init boom")


class NoDot(Todo):
    suffixes = ("nodot",)
    media_types = ()


class Plugin:
    """Registers `converters` (id -> factory) in the given order."""

    def __init__(self, converters: dict) -> None:
        self.converters = converters

    @hookimpl
    def register_converters(self, register):
        for converter_id, factory in self.converters.items():
            register(converter_id, factory)


def loaded(*plugins: Plugin):
    pm = build_plugin_manager(load_entry_points=False)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def test_a_converter_that_cannot_be_built_is_reported_and_costs_only_its_files(tmp_path: Path, caplog):
    pm = loaded(Plugin({"boom": Boom, "inst": Todo(), "nodot": NoDot}))
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.files.converters"):
        converters = load_converters(pm)  # before the fix: RuntimeError, and no ingest at all
    logged = caplog.text
    assert "converter 'boom' (tests.unit.test_converter_plugins.Boom) cannot be built: RuntimeError: converter " \
           "init boom (files .boom are skipped)" in logged
    assert ("converter 'inst' (tests.unit.test_converter_plugins.Todo) is registered as an instance, not a class: "
            "register('inst', Todo) without the ()") in logged
    assert "converter 'nodot' (tests.unit.test_converter_plugins.NoDot) is refused: suffixes holds 'nodot', which " \
           "has no leading dot: write '.nodot'" in logged

    for name in ("a.boom", "b.todo", "c.nodot", "d.md"):
        (tmp_path / name).write_text("water the roses\n", encoding="utf-8")
    files = {Path(f.id).name: f for f in find_files([str(tmp_path)], converters=converters.by_suffix)}
    assert sorted(files) == ["a.boom", "b.todo", "c.nodot", "d.md"]  # the no-dot suffix's file is listed, not lost
    assert files["d.md"].read().documents[0].text == "water the roses\n"
    for name, why in (("a.boom", "cannot be built: RuntimeError: converter init boom"),
                      ("b.todo", "is registered as an instance, not a class"),
                      ("c.nodot", "has no leading dot: write '.nodot'")):
        with pytest.raises(ConversionError, match=why):
            files[name].read()

    suffixes, problems = converter_overview(pm)  # what `duckgraph doctor` shows
    assert suffixes[".pdf"] == "pdf" and suffixes[".boom"] == "boom" and suffixes[".nodot"] == "nodot"
    assert len(problems) == 3 and all(p.startswith("converter '") for p in problems)


@pytest.mark.parametrize("declared, said", [
    ((".PDF2",), None),  # any case: matched without regard to case
    ((".todo.txt",), None),
    (".todo", "has suffixes = '.todo': it must be a tuple of strings, e.g. ('.todo',)"),
    (("todo/x",), "suffixes holds 'todo/x', which is not a file suffix"),
    ((".",), "suffixes holds '.', which is not a file suffix"),
    ((7,), "suffixes holds 7, not a string"),
])
def test_suffixes_are_checked_when_the_converters_load(declared, said):
    bad = type("Declared", (Todo,), {"suffixes": declared})
    converters = load_converters(loaded(Plugin({"declared": bad})))
    problems = [p for p in converters.problems if "'declared'" in p]
    if said is None:
        assert problems == [] and converters.by_suffix[declared[0].lower()].id == "declared"
    else:
        assert len(problems) == 1 and said in problems[0]


def test_a_multi_part_suffix_reads_its_files_and_the_longest_suffix_wins(tmp_path: Path):
    converters = load_converters(loaded(Plugin({"todotxt": TodoTxt})))
    (tmp_path / "list.todo.txt").write_text("buy seeds", encoding="utf-8")
    (tmp_path / "plain.txt").write_text("just text", encoding="utf-8")
    (tmp_path / "SHOUT.TODO.TXT").write_text("loud", encoding="utf-8")
    texts = {Path(f.id).name: f.read().documents[0].text
             for f in find_files([str(tmp_path)], converters=converters.by_suffix)}
    # Before the fix, .todo.txt never matched: the files were read as plain text.
    assert texts == {"list.todo.txt": "TODO buy seeds", "plain.txt": "just text", "SHOUT.TODO.TXT": "TODO loud"}


@pytest.mark.parametrize("order", [("zz-todo", "aa-todo"), ("aa-todo", "zz-todo")])
def test_two_plugins_naming_one_suffix_the_first_id_in_alphabetical_order_wins_and_it_is_reported(order, caplog):
    factories = {"aa-todo": Todo, "zz-todo": OtherTodo}
    pm = loaded(Plugin({order[0]: factories[order[0]]}), Plugin({order[1]: factories[order[1]]}))
    with caplog.at_level(logging.WARNING, logger="duckgraph.core.files.converters"):
        converters = load_converters(pm)
    assert converters.by_suffix[".todo"].id == "aa-todo"  # whatever order the plugins load in
    assert converters.by_media_type["text/x-todo"].id == "aa-todo"
    assert "two converters read the suffix .todo: 'aa-todo' (tests.unit.test_converter_plugins.Todo) is used, not " \
           "'zz-todo' (tests.unit.test_converter_plugins.OtherTodo)" in caplog.text
    assert "uninstall the plugin you do not want" in caplog.text


def test_a_plugin_replaces_a_built_in_reader_and_one_that_works_beats_one_that_cannot_be_built(caplog):
    pdf = type("MyPdf", (Todo,), {"suffixes": (".pdf",), "media_types": ()})
    broken_html = type("BrokenHtml", (Boom,), {"suffixes": (".html",)})
    with caplog.at_level(logging.INFO, logger="duckgraph.core.files.converters"):
        converters = load_converters(loaded(Plugin({"mypdf": pdf, "myhtml": broken_html})))
    assert converters.by_suffix[".pdf"].id == "mypdf"
    assert "the suffix .pdf is read by converter 'mypdf'" in caplog.text  # said, at INFO: it is what was meant
    assert converters.by_suffix[".html"].id == "html"  # the built-in reads them while the plugin cannot
    assert any("two converters read the suffix .html: 'html'" in p for p in converters.problems)


class Faulty(DocumentConverter):
    suffixes = (".bad",)

    def __init__(self, answer) -> None:
        self.answer = answer

    def convert(self, data: bytes, name: str):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer, said", [
    (KeyError("priority"), "converter 'faulty' failed: KeyError: 'priority'"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
     "converter 'faulty' failed: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff"),
    (ConversionError("damaged: no end of file"), "converter 'faulty': damaged: no end of file"),
    ("text", "converter 'faulty' returned a str, not a ConvertedDocument: convert must return ConvertedDocument("),
    ({"text": "x", "title": "x"}, "converter 'faulty' returned a dict, not a ConvertedDocument"),
    (ConvertedDocument(text=None, title="T"), "returned a text that is None, not a str"),
    (ConvertedDocument(text=b"x", title="T"), "returned a text that is a bytes, not a str"),
    (ConvertedDocument(text="x", title=None), "returned a title that is None, not a str"),
    (ConvertedDocument(text="x", metadata={"when": object()}), "returned metadata that is not plain JSON"),
    (ConvertedDocument(text="x", metadata=[("a", 1)]), "returned metadata that is a list, not a dict"),
])
def test_whatever_a_converter_does_wrong_is_a_conversion_error_naming_it(tmp_path: Path, answer, said):
    converters = load_converters(loaded(Plugin({"faulty": lambda: Faulty(answer)})))
    (tmp_path / "x.bad").write_bytes(b"\xff")
    [found] = find_files([str(tmp_path)], converters=converters.by_suffix)
    with pytest.raises(ConversionError) as err:
        found.read()
    assert said in str(err.value)
    if not isinstance(answer, ConversionError):
        assert err.value.__cause__ is answer or not isinstance(answer, BaseException)


def test_a_text_file_that_is_not_utf8_says_who_read_it_as_what(tmp_path: Path):
    (tmp_path / "latin.txt").write_bytes("café".encode("latin-1"))
    [found] = find_files([str(tmp_path)])
    with pytest.raises(DuckgraphError, match=r"duckgraph reads \.txt files as UTF-8 text, and this one is not "
                                             r"\(byte 0xe9 at 3\): if it is Windows-1252 or Latin-1"):
        found.read()


def response(url: str, media_type: str, body: bytes) -> Response:
    return Response(url=url, media_type=media_type, body=body, encoding="utf-8", last_modified=None)


@pytest.mark.parametrize("media_type", ["application/octet-stream", ""])
def test_a_page_of_a_generic_media_type_is_read_by_the_converter_of_its_url_s_suffix(media_type):
    converters = load_converters(loaded(Plugin({"todo": Todo})))
    contents = page_documents("https://h.example/lists/garden.todo?v=2", response(
        "https://h.example/lists/garden.todo?v=2", media_type, b"[ ] water the roses"), converters)
    assert contents.documents[0].text == "TODO [ ] water the roses"  # before: "is not a format duckgraph reads"
    notes = page_documents("https://h.example/notes.md", response(
        "https://h.example/notes.md", media_type, b"# Garden\n\nRoses."), converters)
    assert (notes.documents[0].title, notes.documents[0].text) == ("Garden", "# Garden\n\nRoses.")
    with pytest.raises(DuckgraphError, match=r"is not a format duckgraph reads \(nor is the URL's suffix\)"):
        page_documents("https://h.example/x.bin", response("https://h.example/x.bin", media_type, b"\0"), converters)
    # A named type is what the server says it is: the suffix does not override it.
    with pytest.raises(DuckgraphError, match="image/png is not a format duckgraph reads$"):
        page_documents("https://h.example/a.todo", response("https://h.example/a.todo", "image/png", b"x"), converters)


def test_a_faulty_converter_of_a_page_refuses_that_page_only():
    converters = load_converters(loaded(Plugin({"faulty": lambda: Faulty(KeyError("priority"))})))
    with pytest.raises(ConversionError, match="converter 'faulty' failed: KeyError: 'priority'"):
        page_documents("https://h.example/a.bad", response("https://h.example/a.bad", "", b"x"), converters)
