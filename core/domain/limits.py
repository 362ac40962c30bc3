"""Limits on what one entity holds, shared by every use case that writes entities (and by import, which checks
a file's lines with the tools' own validators: core/domain/model.py)."""

import json
from typing import Any

MAX_DESCRIPTION_CHARS = 4_000
#: What one entity holds: enough for a long-lived one (the reference memory server's prompt keeps everything it
#: learns about the user as observations of `default_user`). Search shows an entity's 20 observations most
#: relevant to the query, get_entities all of them.
MAX_OBSERVATIONS = 1_000
#: One observation is a short fact: as long as a description at most, so that an entity stays readable (open_nodes
#: and search return its observations).
MAX_OBSERVATION_CHARS = 4_000
MAX_PROPERTIES_BYTES = 16_384
#: A source's (a document's) id: `ingest` checks a file's path against it before reading the file.
MAX_SOURCE_ID_CHARS = 200
#: A community report's title and summary, however they are written (the host's tool, a model, an import).
MAX_TITLE_CHARS = 200
MAX_SUMMARY_CHARS = 4_000
#: How far get_entities pages into one entity's relations (strongest first; each page is read from the start).
MAX_RELATIONS_OFFSET = 100_000


def over_limits(description: str, properties: dict[str, Any], observations: int = 0) -> str | None:
    """What an entity holding these has over the limits, as "a description of 4210 characters (the limit is
    4000)", or None. Writes that combine what is stored with what is given (an entity written again, a merge)
    refuse the call with it rather than cut what is over: a file cannot hold what a tool refuses."""
    size = len(json.dumps(properties))
    over = [f"a description of {len(description)} characters (the limit is {MAX_DESCRIPTION_CHARS})"
            if len(description) > MAX_DESCRIPTION_CHARS else "",
            f"properties of {size} bytes as JSON (the limit is {MAX_PROPERTIES_BYTES})"
            if size > MAX_PROPERTIES_BYTES else "",
            f"{observations} observations (the limit is {MAX_OBSERVATIONS})" if observations > MAX_OBSERVATIONS else ""]
    return " and ".join(filter(None, over)) or None
