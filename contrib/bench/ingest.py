"""What `duckgraph ingest` of a folder of documents costs: files/s and passages/s for reading the files alone
(conversion: pdfminer.six, trafilatura, python-docx, front matter) and for the whole ingest (conversion, chunking,
the real default model's embedding, the store's write), with baselines from the same run: the model embedding
the same passages alone, the same texts as plain `.txt` files (everything but the conversion), and the folder
ingested again unchanged (nothing is embedded or written again).

    python contrib/bench/ingest.py [--files 200] [--sections 4] [--workdir DIR]

The folder holds --files generated documents, a quarter of each format: Markdown with front matter, HTML with
navigation around its article, DOCX and PDF, each with --sections headed sections of ~500 characters. Needs the
`documents` extra and the `test` extra's fpdf2 (the writers of tests/documents.py make the files). The model is
loaded before any timer starts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/documents.py writes the PDF and DOCX files

from duckgraph.core.bootstrap import bootstrap  # noqa: E402
from duckgraph.core.config import load_settings  # noqa: E402
from duckgraph.core.domain.chunking import chunk_sections  # noqa: E402
from duckgraph.core.domain.texts import passage_text  # noqa: E402
from duckgraph.core.files import folder  # noqa: E402
from tests.documents import write_docx, write_pdf  # noqa: E402

FORMATS = ("md", "html", "docx", "pdf")
WORDS = ("widget flange gasket valve pump bearing rotor sensor relay boiler turbine piston spring hinge bracket "
         "coupling shaft gear seal filter").split()


def section_text(n: int, s: int) -> str:
    """~500 characters about part n, section s: varied words, so that no two passages embed alike."""
    words = [WORDS[(n * 7 + s * 3 + i * i) % len(WORDS)] for i in range(12)]
    return " ".join(f"The {words[i]} of unit {n}-{s} is checked with the {words[i + 1]} every {i + 2} days."
                    for i in range(0, 10)) + "."


def write_folder(where: Path, files: int, sections: int) -> dict[str, str]:
    """The mixed folder, and the text of each file (for the plain-text baseline)."""
    where.mkdir(parents=True)
    texts = {}
    for n in range(files):
        kind = FORMATS[n % len(FORMATS)]
        title = f"Maintenance note {n}"
        parts = {f"Part {s + 1}": section_text(n, s) for s in range(sections)}
        created = datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(days=n)
        path = where / f"note-{n:04d}.{kind}"
        if kind == "md":
            body = "".join(f"## {h}\n\n{t}\n\n" for h, t in parts.items())
            path.write_text(f"---\ntitle: {title}\ndate: {created.date()}\nauthor: Kim\n---\n{body}", "utf-8")
        elif kind == "html":
            body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in parts.items())
            path.write_text(f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a> "
                            f"<a href='/shop'>Shop</a></nav><article><h1>{title}</h1>{body}</article><footer>"
                            "Copyright. Cookie settings.</footer></body></html>", "utf-8")
        elif kind == "docx":
            write_docx(path, title, parts, created)
        else:
            write_pdf(path, parts, title=title, created=created)
        texts[path.stem] = "".join(f"## {h}\n\n{t}\n\n" for h, t in parts.items())
    return texts


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def conversion(where: Path, converters) -> tuple[float, list[str], dict[str, float]]:
    """Seconds to read every file (by format too), and the texts of the passages they make (as embedded)."""
    by_format: dict[str, float] = {}
    passages = []
    start = time.perf_counter()
    for file in folder.find_files([str(where)], converters=converters.by_suffix):
        began = time.perf_counter()
        documents = file.read().documents
        by_format[file.path.suffix] = by_format.get(file.path.suffix, 0.0) + time.perf_counter() - began
        passages += [passage_text(d.title, text, section) for d in documents for section, text in
                     chunk_sections(d.text)]
    return time.perf_counter() - start, passages, by_format


def embedding(texts: list[str], db: Path) -> float:
    """Seconds the default model takes to embed `texts`, in its batches."""
    embedder = bootstrap(load_settings(db=str(db), warm_up=False)).knowledge_base.embedder
    embedder.embed_documents(["warm-up"])
    step = max(1, embedder.batch_size)
    seconds, _ = timed(lambda: [embedder.embed_documents(texts[i:i + step]) for i in range(0, len(texts), step)])
    return seconds


def whole_ingest(where: Path, db: Path) -> tuple[float, int, int]:
    """Seconds, documents stored and passages written by `ingest` of the folder into `db`."""
    services = bootstrap(load_settings(db=str(db), warm_up=False))
    with services.knowledge_base as kb:
        kb.embedder.embed_documents(["warm-up"])  # the model loads outside the timer
        files = folder.find_files([str(where)], converters=services.url_fetching.converters.by_suffix)
        seconds, report = timed(lambda: folder.ingest(kb, files, extract=False))
    return seconds, len(report.stored), sum(r.chunks_written for r in report.results)


def line(name: str, seconds: float, files: int, passages: int) -> str:
    return (f"{name:<34} {seconds:8.2f} s {files / seconds:9.1f} files/s {passages / seconds:9.1f} passages/s "
            f"({files} files, {passages} passages)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--sections", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="duckgraph-ingest-", dir=args.workdir))
    try:
        mixed, plain = work / "mixed", work / "plain"
        seconds, texts = timed(lambda: write_folder(mixed, args.files, args.sections))
        plain.mkdir()
        for stem, text in texts.items():
            (plain / f"{stem}.txt").write_text(text, "utf-8")
        print(f"wrote {args.files} files ({', '.join(FORMATS)}; {args.sections} sections each) in {seconds:.1f} s")

        converters = bootstrap(load_settings(db=str(work / "none.duckdb"), warm_up=False)).url_fetching.converters
        seconds, passages, by_format = conversion(mixed, converters)
        print(line("conversion alone (mixed)", seconds, args.files, len(passages)))
        each = args.files / len(FORMATS)
        print("  per format: " + ", ".join(f"{suffix} {each / spent:.1f} files/s"
                                           for suffix, spent in sorted(by_format.items())))
        seconds = embedding(passages, work / "none.duckdb")
        print(line("embedding the passages alone", seconds, args.files, len(passages)))
        seconds, stored, written = whole_ingest(plain, work / "plain.duckdb")
        print(line("whole ingest, same texts as .txt", seconds, stored, written))
        seconds, stored, written = whole_ingest(mixed, work / "mixed.duckdb")
        print(line("whole ingest (mixed)", seconds, stored, written))
        again, _, _ = whole_ingest(mixed, work / "mixed.duckdb")
        print(f"{'ingest again, unchanged (mixed)':<34} {again:8.2f} s {args.files / again:9.1f} files/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
