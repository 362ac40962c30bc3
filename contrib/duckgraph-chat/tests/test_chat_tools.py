"""The tool checks of the bridge on their own: schema conversion and every way a call is refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from duckgraph_chat.tools import MAX_RESULT_CHARS, ToolBox, ToolCall, ToolCallError, result_text

SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "minLength": 1}}, "required": ["query"]}
BOX = ToolBox([SimpleNamespace(name="search", description="Finds.", input_schema=SCHEMA)])


def test_tools_are_offered_with_their_schemas():
    assert BOX.for_model() == [{"type": "function", "function": {"name": "search", "description": "Finds.",
                                                                 "parameters": SCHEMA}}]


@pytest.mark.parametrize(("arguments", "error"), [
    ('{"query": "x",}', "the arguments of search are not valid JSON (Expecting property name"),
    ("[]", "the arguments of search must be a JSON object, not list"),
    (None, "invalid arguments for search: (arguments): 'query' is a required property"),
    ({"query": ""}, "invalid arguments for search: query: '' should be non-empty"),
])
def test_bad_arguments_say_what_to_fix(arguments, error):
    with pytest.raises(ToolCallError) as raised:
        BOX.checked_arguments(ToolCall("search", arguments))
    assert str(raised.value).startswith(error)


def test_valid_arguments_pass_as_text_or_object():
    assert BOX.checked_arguments(ToolCall("search", '{"query": "x"}')) == {"query": "x"}
    assert BOX.checked_arguments(ToolCall("search", {"query": "x"})) == {"query": "x"}


def test_an_invented_tool_is_named_with_the_real_ones():
    with pytest.raises(ToolCallError, match="unknown tool 'remember': the tools are search"):
        BOX.checked_arguments(ToolCall("remember", {}))


def test_a_server_schema_that_is_not_a_schema_is_refused_at_start():
    with pytest.raises(ValueError, match="the MCP tool broken has an invalid input schema"):
        ToolBox([SimpleNamespace(name="broken", description="", input_schema={"type": 5})])


def test_results_are_text_marked_as_errors_and_cut_when_huge():
    def result(text, is_error=False):
        return SimpleNamespace(content=[SimpleNamespace(text=text)], structured_content=None, is_error=is_error)

    assert result_text(result("found")) == "found"
    assert result_text(result("no such entity", True)) == "Error: no such entity"
    cut = result_text(result("x" * (MAX_RESULT_CHARS + 10)))
    assert cut.endswith("[... 10 more characters cut]") and len(cut) < MAX_RESULT_CHARS + 40
    structured = SimpleNamespace(content=[], structured_content={"a": 1}, is_error=False)
    assert result_text(structured) == '{"a": 1}'
