"""Limits on what one entity holds, shared by every use case that writes entities (and by import, which checks
a file's lines with the tools' own validators: core/domain/model.py)."""

MAX_DESCRIPTION_CHARS = 4_000
MAX_OBSERVATIONS = 200
#: One observation is a short fact: as long as a description at most, so that an entity stays readable (open_nodes
#: and search return its observations) and 200 of them stay under a megabyte.
MAX_OBSERVATION_CHARS = 4_000
