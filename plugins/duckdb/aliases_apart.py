"""Aliases that an older rule of name keys joined to their entity, and this one keeps apart.

A name's loose key joins the spellings of one name ("José", "Jose"), and a new name that one of an entity's keys
joined was merged into it and kept as its alias (`create_entities`: "merged_into"). Name keys 2 and 3 dropped
symbols, so "C++" and "C#" were merged into "C", their observations and relations with them; keys 4 keep them apart
(schema.py `NAME_KEYS_VERSION`), but rebuilding the keys splits nothing. Nor should it by itself: an alias may be
meant. So the rebuild finds these aliases (`find`) and keeps them in `meta`, and the log and `duckgraph doctor` name
them (`held`) as long as their entity has them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.ports import entity_key, loose_key
from duckgraph.ports.names import MARKS, unaccented

#: The `meta` row that keeps the aliases found (JSON: [{"namespace", "id", "name", "alias"}]).
META_KEY = "aliases_apart"

_WORD_2 = re.compile(r"[^\W_]+")
_WORD_3 = re.compile(rf"[^\W_]+(?:(?=[^\x00-\u02ff])[{MARKS}]+[^\W_]*)*")


def _loose_2(key: str) -> str:
    """The loose form of name keys 2: every combining mark dropped (the kana voicing marks too), and every symbol."""
    if not key.isascii():
        decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", key))
        key = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(_WORD_2.findall(key.casefold()))


def _loose_3(key: str) -> str:
    """The loose form of name keys 3: accents dropped (`unaccented`), other marks kept, and every symbol dropped."""
    return " ".join(_WORD_3.findall(key.casefold() if key.isascii() else unaccented(key)))


#: The loose forms of the older name keys, frozen as they were, by version (keys 1 had none).
OLDER_LOOSE_FORMS: dict[str, Callable[[str], str]] = {"2": _loose_2, "3": _loose_3}


def find(nodes: Iterable[tuple[int, str, str, str, Sequence[str] | None]],
         version: str | None) -> list[dict[str, Any]]:
    """The aliases that name keys `version` joined to another name of their entity (its name or another alias) and
    today's loose key does not, for `nodes` as (id, namespace, name, key, aliases) rows: [{"namespace", "id",
    "name", "alias"}]. A name was merged into an entity when its key or loose form was one of the entity's keys or
    their loose forms (`schema.name_keys`)."""
    older = OLDER_LOOSE_FORMS.get(version or "")
    if older is None:
        return []
    found = []
    for node_id, namespace, name, key, aliases in nodes:
        keys = [key, *(entity_key(alias) for alias in aliases or ())]
        for alias, alias_key in zip(aliases or (), keys[1:]):
            others = [other for other in keys if other != alias_key]
            was, now = older(alias_key), loose_key(alias_key)
            if was and was in {*others, *map(older, others)} and now not in {*others, *map(loose_key, others)}:
                found.append({"namespace": namespace, "id": node_id, "name": name, "alias": alias})
    return found


def kept(stored: str | None, found: list[dict[str, Any]]) -> str:
    """The `meta` value with `found` added to those a former rebuild kept (`stored`)."""
    items = {(item["id"], entity_key(item["alias"])): item for item in json.loads(stored or "[]") + found}
    return json.dumps(list(items.values()), ensure_ascii=False)


def held(con: Any, stored: str | None) -> list[dict[str, Any]]:
    """The entities that still have aliases kept in `meta` (`stored`), each {"namespace", "name", "aliases" (all of
    them now), "apart" (those kept)}, by their name now; an alias removed, or its entity deleted, is done with."""
    items = json.loads(stored or "[]")
    if not items:
        return []
    rows = con.execute(f"SELECT id, namespace, name, aliases FROM nodes WHERE id IN "
                       f"(SELECT unnest({sql.JSON_IDS % 1})) ORDER BY id",
                       [sql.json_list({item["id"] for item in items})]).fetchall()
    entities = []
    for node_id, namespace, name, aliases in rows:
        listed = {entity_key(item["alias"]) for item in items if item["id"] == node_id}
        apart = [alias for alias in aliases or () if entity_key(alias) in listed]
        if apart:
            entities.append({"namespace": namespace, "name": name, "aliases": list(aliases), "apart": apart})
    return entities
