"""An email thread stored one message per document, each reply quoting the messages before it as mail programs
do, under a signature with a legal disclaimer (real DuckDB file, the real default model)."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model

SIGNATURE = ("--\n{name}\nNorthwind Traders\n\n\nCONFIDENTIALITY NOTICE: This e-mail message, including any "
             "attachments, is for the sole use of the intended recipient(s) and may contain confidential and "
             "privileged information. Any unauthorized review, use, disclosure or distribution is prohibited. If you "
             "are not the intended recipient, please contact the sender by reply e-mail and destroy all copies of the "
             "original message.")
MESSAGES = [
    ("Sarah Kim", "2026-11-10T09:02:00-05:00",
     "Hi all,\n\nFacilities confirmed we are moving the Boston office from 200 Clarendon St to the new space at 88 "
     "Seaport Blvd, 5th floor. The move date is Saturday, December 12, 2026. Movers (Atlas Relocation) arrive at "
     "7am.\n\nEveryone needs to pack their desk into the labelled crates by Thursday December 10."),
    ("Alex Rivera", "2026-11-10T11:40:00-05:00",
     "Thanks Sarah. Who is handling the server rack and the phone lines? Our Comcast contract is tied to Clarendon "
     "St."),
    ("Sarah Kim", "2026-11-11T08:15:00-05:00",
     "Good question. Raj from IT owns the server rack migration. Alex, can you call Comcast and move the business "
     "internet contract to 88 Seaport by December 1?"),
    ("Raj Patel", "2026-11-11T14:05:00-05:00",
     "Confirmed, I will move the rack on Friday December 11 after 6pm so nobody loses network during the day. I need "
     "two people to help lift the UPS."),
    ("Sarah Kim", "2026-11-12T10:30:00-05:00",
     "Update: the landlord moved the key handover to Monday December 14, so the move itself slips to Tuesday December "
     "15. Crates still due Thursday December 10. Raj, please move the rack on December 14 instead."),
]


def thread() -> list[DocumentInput]:
    """Each message with its sender's signature, then the one before it quoted whole below an attribution line."""
    bodies: list[str] = []
    for i, (sender, _, words) in enumerate(MESSAGES):
        body = f"{words}\n\n{SIGNATURE.format(name=sender)}"
        if bodies:
            earlier, when = MESSAGES[i - 1][0], MESSAGES[i - 1][1]
            quoted = "\n".join(f"> {line}".rstrip() for line in bodies[-1].split("\n"))
            body += f"\n\nOn {when[:10]} at {when[11:16]} {earlier} wrote:\n{quoted}"
        bodies.append(body)
    return [DocumentInput(id=f"mail-{i}", title="Office move to 88 Seaport", time=when,
                          text=f"From: {sender}\nDate: {when}\n\n{body}")
            for i, ((sender, when, _), body) in enumerate(zip(MESSAGES, bodies), 1)]


@pytest.fixture(scope="module")
def kb(tmp_path_factory, minilm):
    with KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("thread") / "kb.duckdb"), minilm) as knowledge_base:
        knowledge_base.add_documents(thread())
        yield knowledge_base


def test_the_newest_reply_s_own_words_are_shown_and_the_quotes_are_folded(kb) -> None:
    """Each reply quoting the thread below it, the passages shown all held the first message's move date and the
    newest reply's new date was never shown. The reply's own words are a passage of their own now, shown; the first
    message is shown once, naming the four replies' quotes of it; the freed places go to the other messages' own
    words."""
    result = kb.search("When is the office move?")
    texts = [passage.text for passage in result.passages]
    assert any("Tuesday December 15" in text for text in texts), texts
    assert sum("Saturday, December 12" in text for text in texts) == 1, texts
    first = next(p for p in result.passages if "Saturday, December 12" in p.text)
    assert first.document_id == "mail-1" and not first.text.startswith(">"), first
    assert sorted(other.split("#")[0] for other in first.also_in) == ["mail-2", "mail-3", "mail-4", "mail-5"]
    assert result.text.count("Saturday, December 12") == 1
    assert {p.document_id for p in result.passages} == {f"mail-{i}" for i in range(1, 6)}, texts


def test_signatures_take_no_place_of_the_thread_s_messages(kb) -> None:
    """A signature and its disclaimer are passages of their own, not lifted as the reply to the passage before
    them: the five messages' own words are the passages shown, the signatures come after them if at all."""
    result = kb.search("Summarise the thread about the office move")
    assert not any("CONFIDENTIALITY" in p.text for p in result.passages), [p.text for p in result.passages]
    assert {p.document_id for p in result.passages} == {f"mail-{i}" for i in range(1, 6)}


def test_the_thread_is_stored_as_given_and_read_whole(kb) -> None:
    """Nothing is dropped: each document's text is the one given, and its passages hold every line of it but those
    of quote markers alone."""
    given = {document.id: document.text for document in thread()}
    stored = kb.store.get_documents(list(given), kb.namespace)
    assert {document.id: document.text for document in stored} == given
    passages = "\n".join(chunk.text for chunk in kb.store.document_chunks(kb.namespace, ["mail-5"]))
    assert all(line in passages for line in given["mail-5"].split("\n") if line.strip(" >")), passages


def test_a_signature_takes_no_place_among_the_passages_ranked_next(tmp_path, minilm) -> None:
    """The chunks next to a shown passage join the passages ranked next, scored as that passage: an email's
    signature and disclaimer, the chunk after its own words, took the first of those places ahead of notes on the
    question. It is no text the passage goes on with: the notes are shown, the disclaimer is not."""
    email = ("From: Sarah Kim\nDate: 2026-11-24T08:47:00-05:00\n\nHi Alex,\n\nCould you please update the Q4 budget "
             "deck with the new Acme licence costs and send it to me by Wednesday December 2? The budget review with "
             "the CFO is on Thursday December 3 at 2pm.\n\n" + SIGNATURE.format(name="Sarah Kim"))
    notes = ["Finance keeps the budget decks of past years on the shared drive.",
             "The Q3 spending report is due at the end of the month.",
             "Team offsites are planned once the yearly budget is approved."]
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([DocumentInput(id="mail:budget", title="Q4 budget deck for Thursday", text=email),
                          *(DocumentInput(id=f"note{i}", text=text) for i, text in enumerate(notes))])
        chunks = kb.store.document_chunks(kb.namespace, ["mail:budget"])
        assert len(chunks) == 2 and chunks[1].text.startswith("--\nSarah Kim")  # the set-up
        result = kb.search("When is the budget review?", max_passages=2, more_passages=2)
        assert result.passages[0].document_id == "mail:budget", result.text
        assert "CONFIDENTIALITY" not in result.text, result.text
        assert all(note in result.text for note in notes), result.text


def test_a_signature_takes_not_its_mail_s_turn(tmp_path, minilm) -> None:
    """The question names the sender, whom the signature names and the mail's own words do not: the signature
    ranked first and took the mail's turn, its request only among the passages ranked lower. The request is the
    mail's passage among the best; the signature comes after the other mails' own words."""
    request = ("Hi,\n\nCould you please update the Q4 budget deck with the new travel numbers? The travel line is now "
               "9500 euros.\n\nThanks,\nSarah\n\n-- \nSarah Lee | Finance Director | Acme Corp\nThis email and any "
               "attachments are confidential and may be privileged. If you are not the intended recipient, delete it.")
    others = {"Holiday party": "The holiday party is on December 18 at the Rooftop Bar. Please RSVP to Olga by "
                               "December 1.",
              "Office move": "Hi team,\n\nThe office move is scheduled for December 12. Please pack your desks by "
                             "December 10.\n\nBest,\nTom"}
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([DocumentInput(id="sarah-1", title="Q4 budget review", text=request),
                          *(DocumentInput(id=title, title=title, text=text) for title, text in others.items())])
        signature = kb.store.document_chunks(kb.namespace, ["sarah-1"])[-1]
        assert signature.text.startswith("-- \nSarah Lee")  # the set-up
        result = kb.search("What did Sarah ask me to do?", max_passages=3)
        mail = [p.text for p in result.passages if p.document_id == "sarah-1"]
        assert len(mail) == 1 and "update the Q4 budget deck" in mail[0], result.text
        assert "Finance Director" not in " ".join(p.text for p in result.passages), result.text


def test_the_first_message_takes_the_place_of_its_quotes_in_a_longer_thread(tmp_path, minilm) -> None:
    """Three messages, each reply quoting the one before whole: the reply's quote of the first message ranked
    first and the first message, the same words, was folded into it, shown under the reply's title and time. The
    first message is shown, naming both replies' quotes of it."""
    first = "Hi all,\n\nThe vendor review is on Thursday at 10:00 in room Aurora. Please bring the SLA numbers.\n\n" \
            "Thanks,\nMaria"

    def quoted(text: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))

    second = ("Maria, can we move it to Friday? I have a conflict on Thursday.\n\nOn Mon, Mar 2, 2026 at 9:00 AM "
              "Maria Garcia <maria@acme.com> wrote:\n" + quoted(first))
    third = ("Sure, Friday at 14:00 works. Moved to room Borealis.\n\nMaria\n\nOn Mon, Mar 2, 2026 at 11:00 AM Ben "
             "Okafor <ben@acme.com> wrote:\n" + quoted(second))
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_documents([DocumentInput(id=f"mail-{i}", title=("Re: " if i > 1 else "") + "Vendor review",
                                        time=f"2026-03-02T{8 + i:02d}:00:00Z", text=text)
                          for i, text in enumerate((first, second, third), 1)])
        result = kb.search("When is the vendor review?", max_passages=3)
        shown = [p for p in result.passages if "room Aurora" in p.text]
        assert len(shown) == 1 and shown[0].document_id == "mail-1", result.text
        assert sorted(other.split("#")[0] for other in shown[0].also_in) == ["mail-2", "mail-3"]
