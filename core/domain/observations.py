"""Observations as stored and as compared: one text, whatever Unicode form or spacing it was typed in.

A text typed composed ("é" as one character, NFC) and the same text pasted decomposed ("e" and a combining accent,
NFD, as macOS and some editors write it) look the same but are different strings; so are "open late", "open late "
and "open  late". Every way in stores an observation composed and trimmed (`observation_text`, applied by the
validated inputs of core/domain/model.py: the tools, `duckgraph import`, extraction), and observations are compared
by `observation_key`: composed, each run of whitespace one space. So such a variant is never a second observation of
an entity, and removing one by the text a reader sees finds it, one stored before this rule (unnormalised) too. Case
is kept: "US" and "us", "May" and "may" can be other facts.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable, Sequence

from duckgraph.ports.text import one_line

#: How alike (difflib's ratio of the case-folded texts, 0 to 1) a stored observation must be to a text that names
#: none to be offered in its place: "Lives in Berlin." and "lives in Berlin" are 0.97 alike, "lives in Berlin" and
#: "lives in Bern" 0.93, "likes tea" and "lives in Berlin" 0.5.
NEAR_OBSERVATION = 0.75


def observation_text(text: str) -> str:
    """`text` as an observation is stored: composed (NFC) and trimmed; its own line breaks kept."""
    return (text if text.isascii() else unicodedata.normalize("NFC", text)).strip()


def observation_key(text: str) -> str:
    """What two observations are compared by: composed (NFC), each run of whitespace one space, trimmed."""
    return one_line(observation_text(text))


def new_observations(current: Sequence[str], given: Iterable[str]) -> list[str]:
    """Those of `given` that `current` does not hold, each once (the first spelling given), in order."""
    held = {observation_key(t) for t in current}
    added = []
    for text in given:
        if (key := observation_key(text)) not in held:
            held.add(key)
            added.append(text)
    return added


def named_observations(current: Sequence[str], texts: Iterable[str]) -> list[str]:
    """The observations of `current` (as stored, in stored order) that `texts` name."""
    wanted = {observation_key(t) for t in texts}
    return [t for t in current if observation_key(t) in wanted]


def absent_observations(current: Sequence[str], texts: Iterable[str]) -> list[str]:
    """Those of `texts` that name none of `current`, each once."""
    held = {observation_key(t) for t in current}
    return [t for t in dict.fromkeys(texts) if observation_key(t) not in held]


def nearest_observation(current: Sequence[str], text: str) -> str | None:
    """The observation of `current` most like `text` (which names none of them), compared case-folded, if one is at
    least `NEAR_OBSERVATION` alike: what a caller that misremembered a stored text likely meant."""
    folded = {observation_key(t).casefold(): t for t in reversed(current)}  # the first stored of equal ones
    near = difflib.get_close_matches(observation_key(text).casefold(), list(folded), n=1, cutoff=NEAR_OBSERVATION)
    return folded[near[0]] if near else None
