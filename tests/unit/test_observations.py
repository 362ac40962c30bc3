"""Observations as stored and compared: one text whatever Unicode form or spacing it was typed in; case kept."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.model import MemoryEntityInput, NodeInput, ObservationAddition
from duckgraph.core.domain.observations import (
    absent_observations,
    named_observations,
    new_observations,
    observation_key,
    observation_text,
)

NFC, NFD = "cr\u00e8me br\u00fbl\u00e9e served", "cre\u0300me bru\u0302le\u0301e served"


def test_an_observation_is_stored_composed_and_trimmed_with_its_line_breaks():
    assert observation_text(f"  {NFD}\n") == NFC
    assert observation_text(" open late ") == "open late"
    assert observation_text("line one\nline two") == "line one\nline two"


@pytest.mark.parametrize("variant", [NFD, f"{NFC} ", f" {NFD}\t", "crème  brûlée\nserved"])
def test_form_and_spacing_variants_are_one_observation(variant):
    assert observation_key(variant) == observation_key(NFC)


def test_case_variants_stay_two_observations():
    assert observation_key("Open late") != observation_key("open late")
    assert new_observations(["open late"], ["Open late", "open late ", NFD, NFC]) == ["Open late", NFD]


def test_removal_names_stored_variants_and_reports_what_it_names_nothing_of():
    stored = [NFD, "open late ", "Open late"]  # as a file written before the rule may hold them
    assert named_observations(stored, [NFC, "open late"]) == [NFD, "open late "]
    assert absent_observations(stored, [NFC, "closed", "closed "]) == ["closed", "closed "]


@pytest.mark.parametrize("make", [
    lambda texts: NodeInput(name="Cafe", type="place", observations=texts).observations,
    lambda texts: MemoryEntityInput(name="Cafe", entityType="place", observations=texts).observations,
    lambda texts: ObservationAddition(entityName="Cafe", contents=texts).contents,
])
def test_every_input_stores_observations_normalised(make):
    assert make([NFD, " open late "]) == [NFC, "open late"]
