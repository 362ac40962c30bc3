"""Community reports written by the host's own model through MCP sampling (the `community_reports_by_sampling`
setting): the client's `sampling/createMessage` as the chat model of ports/extractor.py's ChatExtractor (its
instructions, validation and retry), run by the domain's report loop, which stores what comes back."""

from __future__ import annotations

import logging
import warnings

import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ClientCapabilities, SamplingCapability, SamplingMessage, TextContent

from duckgraph.core.domain.model import ReportsWritten
from duckgraph.ports import ExtractionError
from duckgraph.ports.extractor import ChatExtractor, Message, ReplyFormat

log = logging.getLogger(__name__)

#: Reports asked of the host's model per build: each is one request the host may show its user and pay for.
REPORTS_PER_BUILD = 20
#: A report is a title and 3-6 sentences; the JSON around them included.
MAX_REPLY_TOKENS = 1_000
NO_SAMPLING = ("The client does not offer MCP sampling, so the host's model wrote no reports (the extractive ones "
               "stand): community_reports_by_sampling needs a client that declares the sampling capability.")
NO_CLIENT = ("This call came from no MCP client (the web UI, or another duckgraph server of the file), so no host's "
             "model was asked for reports (the extractive ones stand).")
NO_BACK_CHANNEL = ("The client's protocol ({protocol}) lets a server ask nothing during a call, so the host's model "
                   "wrote no reports through MCP sampling (the extractive ones stand).")


class SamplingWriter(ChatExtractor):
    """A report writer whose chat model is the host's, reached through the client during a tool call. Runs on a
    worker thread (the domain's loop is synchronous) and sends each request on the call's event loop.

    After one refused request it asks no more: the client would refuse the next ones too."""

    def __init__(self, ctx: Context) -> None:
        super().__init__("the host's model", max_attempts=2)  # one retry, with the problem shown, on a bad reply
        self.ctx = ctx
        self.refused: str | None = None

    @property
    def id(self) -> str:
        return "sampling"

    def complete(self, messages: list[Message], reply: ReplyFormat) -> str:
        if self.refused is not None:
            raise ExtractionError(f"not asked: the client refused an earlier request ({self.refused})")
        try:
            return anyio.from_thread.run(self._ask, messages)
        except MCPError as exc:
            self.refused = str(exc)
            raise ExtractionError(f"the client refused the sampling request: {exc}") from exc
        except ValueError as exc:  # a result that is not a CreateMessageResult
            raise ExtractionError(f"the client's sampling result is malformed: {exc}") from exc

    async def _ask(self, messages: list[Message]) -> str:
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        conversation = [SamplingMessage(role=m["role"], content=TextContent(type="text", text=m["content"]))
                        for m in messages if m["role"] != "system"]
        with warnings.catch_warnings():  # sampling is deprecated in the newest protocol, and what hosts offer today
            warnings.simplefilter("ignore")
            result = await self.ctx.session.create_message(
                conversation, max_tokens=MAX_REPLY_TOKENS, system_prompt=system or None,
                related_request_id=self.ctx.request_context.request_id)
        if not isinstance(result.content, TextContent):
            raise ExtractionError(f"the host's model answered with {result.content.type}, not text")
        return result.content.text


def no_sampling(ctx: Context) -> str | None:
    """Why the host's model cannot be asked during this call, or None when it can."""
    try:
        session = ctx.session
    except ValueError:  # a call the web UI makes, or one run for another server of the file: no client to ask
        return NO_CLIENT
    if not session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
        return NO_SAMPLING
    if not session.can_send_request:
        return NO_BACK_CHANNEL.format(protocol=session.protocol_version)
    return None


async def write_reports_by_sampling(ctx: Context, namespace: str) -> str:
    """Have the host's model write the reports still extractive or stale, and say what came of it (also in the
    log). Never raises for the client's sake: the build stands with its extractive reports."""
    from duckgraph.core.mcp.tools.common import call, kb_of  # here: the tools package imports this module

    if (why := no_sampling(ctx)) is not None:
        log.warning("community reports by sampling: %s", why)
        return why
    try:
        done: ReportsWritten = await call(kb_of(ctx).communities.write_reports, namespace, SamplingWriter(ctx),
                                          author="sampling", limit=REPORTS_PER_BUILD)
    except ToolError as exc:  # e.g. the communities were rebuilt meanwhile: the build's result still stands
        log.warning("community reports by sampling failed: %s", exc)
        return f"Writing community reports through MCP sampling failed ({exc}); the extractive reports stand."
    note = (f"The host's model wrote {done.written} community reports through MCP sampling; {done.remaining} "
            "communities still lack a written report")
    if done.failed:
        note += f". {len(done.failed)} failed, the extractive report kept: " + "; ".join(done.failed[:3])
        log.warning("community reports by sampling: %d failed: %s", len(done.failed), "; ".join(done.failed))
    return note + "."
