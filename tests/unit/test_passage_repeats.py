"""The fold of repeated passages (`passage_ranking.without_repeats`): a passage all of whose sentences another
shown one holds is not shown again, but named in that one's `also_in`."""

from __future__ import annotations

from duckgraph.core.domain.passage_ranking import without_repeats
from duckgraph.ports import ChunkRecord

ORIGINAL = ("From: Sarah Kim <sarah.kim@northwind.example>\n\nHi all,\n\nThe move date is Saturday, December 12. "
            "Movers arrive at 7am.")
QUOTE = ("On Tue, Nov 10, 2026 at 09:02 Sarah Kim wrote:\n> > Hi all,\n> >\n> > The move date is Saturday, December "
         "12. Movers\n> > arrive at 7am.")


def chunk(chunk_id: int, text: str) -> ChunkRecord:
    return ChunkRecord(document_id=f"mail-{chunk_id}", ordinal=0, text=text, id=chunk_id)


def folded(*texts: str) -> list[tuple[int, float, list[int]]]:
    ranked = [(chunk(i, text), 1.0 - i / 10) for i, text in enumerate(texts)]
    return [(kept.id, score, [other.id for other in repeats]) for kept, score, repeats in without_repeats(ranked)]


def test_a_quote_is_folded_into_the_better_ranked_message_it_quotes() -> None:
    """Its quote markers, its attribution line and its line breaks aside, a reply's quote holds nothing the message
    does not: it frees its place."""
    assert folded(ORIGINAL, "Thanks, noted.", QUOTE) == [(0, 1.0, [2]), (1, 0.9, [])]


def test_the_message_takes_the_place_of_its_quote_ranked_above_it() -> None:
    """The quote ranked first, the message it quotes (with the sender's header, a sentence more) third: the message
    is shown once, in the quote's place and with its score, naming the quote."""
    assert folded(QUOTE, "Thanks, noted.", ORIGINAL) == [(2, 1.0, [0]), (1, 0.9, [])]


def test_a_passage_with_a_sentence_of_its_own_is_shown() -> None:
    """A reply that quotes a message and says something more is no repeat, nor a passage whose words are the end
    of a longer word of the other ("movers" in "removers")."""
    more = QUOTE + "\n\nThe rack moves on Friday."
    assert folded(ORIGINAL, more) == [(0, 1.0, []), (1, 0.9, [])]
    assert folded("The removers arrive at 7am.", "movers arrive at 7am.") == [(0, 1.0, []), (1, 0.9, [])]


def test_the_message_takes_the_place_of_a_quote_of_it_word_for_word() -> None:
    """A thread's first message quoted whole by the reply and again, a level deeper, by the reply to the reply:
    the quotes ranked above it hold its words and nothing more, as it holds theirs. The message is shown, in the
    first quote's place and with its score, naming both quotes; a copy of it unquoted is still folded into it."""
    message = "Hi all,\n\nThe vendor review is on Thursday at 10:00. Please bring the SLA numbers.\n\nThanks,\nMaria"
    quote = "On Mon, Mar 2, 2026 at 9:00 AM Maria Garcia wrote:\n" + "\n".join(
        f"> {line}".rstrip() for line in message.split("\n"))
    nested = "\n".join(f"> {line}".rstrip() for line in quote.split("\n"))
    assert folded(quote, nested, "Friday works.", message, message) == [(3, 1.0, [0, 1, 4]), (2, 0.8, [])]
