"""Limits on what one entity holds, shared by every use case that writes entities."""

MAX_DESCRIPTION_CHARS = 4_000
MAX_OBSERVATIONS = 200
