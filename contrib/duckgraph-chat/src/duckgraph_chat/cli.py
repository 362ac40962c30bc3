"""`duckgraph-chat`: a terminal chat between a local model and an MCP server started as a command over stdio.

    duckgraph-chat --model qwen3:8b                                  # Ollama, and `duckgraph serve`
    duckgraph-chat --api openai --base-url http://127.0.0.1:1234/v1 --model qwen3-8b -- duckgraph serve --db x.duckdb

Each line read is one message; the answer streams to stdout, tool calls are traced on stderr. `/exit` or end of
input ends the chat. Exit status: 0; 2 when the MCP server cannot be started or stops; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

import anyio
import anyio.from_thread
import anyio.lowlevel

from duckgraph_chat.models import ModelError, make_model
from duckgraph_chat.prompt import system_prompt
from duckgraph_chat.session import ChatSession, TurnFailed
from duckgraph_chat.tools import ToolBox

DEFAULT_SERVER = ["duckgraph", "serve"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="duckgraph-chat", description="Chat with a local model that uses an MCP server (duckgraph) as memory.",
        epilog="Everything after -- is the MCP server's command line (default: duckgraph serve); it inherits this "
               "environment, DUCKGRAPH_* variables included.")
    parser.add_argument("--model", default="qwen3:8b", help="the chat model (default: qwen3:8b)")
    parser.add_argument("--api", choices=["ollama", "openai"], default="ollama",
                        help="ollama: /api/chat; openai: any OpenAI-compatible /v1/chat/completions")
    parser.add_argument("--base-url", help="the model server (default: http://127.0.0.1:11434 for ollama, "
                                           "http://127.0.0.1:1234/v1 for openai)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="the environment variable holding the API key, for --api openai (default: OPENAI_API_KEY)")
    parser.add_argument("--max-tool-rounds", type=int, default=6,
                        help="tool rounds per answer before the model must answer (default: 6)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the model's next bytes (default: 300)")
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...: the MCP server to start")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = (args.server[1:] if args.server[:1] == ["--"] else args.server) or DEFAULT_SERVER
    if args.max_tool_rounds < 1:
        _parser().error("--max-tool-rounds must be at least 1")
    try:
        return anyio.run(_chat, args, command)
    except KeyboardInterrupt:
        return 130


async def _chat(args: argparse.Namespace, command: list[str]) -> int:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # The server gets this whole environment: the SDK passes only a few variables by default, not DUCKGRAPH_*.
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    model = make_model(args.api, args.model, args.base_url, args.timeout, args.api_key_env)
    shown = " ".join(command)
    try:
        async with Client(stdio_client(params)) as client:
            try:
                toolbox = ToolBox((await client.list_tools()).tools)
            except ValueError as exc:  # a tool whose schema cannot be checked: the server needs fixing
                _trace(f"error: {exc}")
                return 2
            session = ChatSession(client, model, toolbox, await system_prompt(client, _trace),
                                  max_tool_rounds=args.max_tool_rounds, write=_write, trace=_trace)
            _trace(f"[connected to `{shown}`: {len(toolbox.names)} tools; model {args.model} over {args.api}]")
            await _loop(session)
    except OSError as exc:
        _trace(f"error: cannot start the MCP server `{shown}`: {exc}. Is it installed and on PATH? Give its "
               "command after --")
        return 2
    except Exception as exc:
        lost = _connection_loss(exc)
        if lost is None:
            raise
        _trace(f"error: the MCP server `{shown}` stopped or failed ({lost}); its messages above say why")
        return 2
    return 0


async def _loop(session: ChatSession) -> None:
    interactive = sys.stdin.isatty()
    lines = _Lines(sys.stdin.fileno(), sys.stdin.encoding or "utf-8")
    while True:
        if interactive:
            _write("you> ")
        line = await lines.readline()
        if line is None or line.strip() in ("/exit", "/quit"):
            return
        if not line.strip():
            continue
        try:
            await session.turn(line.strip())
        except ModelError as exc:
            _trace(f"error: {exc}")
            if isinstance(exc, TurnFailed):  # said after the error: the memory changed though the answer failed
                _trace(exc.note)


class _Lines:
    """The lines of a file descriptor, decoded with U+FFFD in place of bytes its encoding cannot read (a line
    typed in a Latin-1 terminal must not end the chat, nor reach the model as text that cannot be sent).

    Read in daemon threads straight from the descriptor: an anyio worker thread in sys.stdin.readline could not be
    abandoned, so Ctrl-C at the prompt would wait for Enter, and the interpreter's exit would wait for it too."""

    def __init__(self, fd: int, encoding: str) -> None:
        self._fd, self._encoding = fd, encoding
        self._pending, self._ended = b"", False

    async def readline(self) -> str | None:
        """The next line with its newline, or None at end of input."""
        while b"\n" not in self._pending and not self._ended:
            chunk = await self._read()
            self._pending += chunk
            self._ended = not chunk
        line, newline, self._pending = self._pending.partition(b"\n")
        return (line + newline).decode(self._encoding, errors="replace") if line or newline else None

    async def _read(self) -> bytes:
        token = anyio.lowlevel.current_token()
        send, receive = anyio.create_memory_object_stream[bytes](1)

        def read() -> None:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # the terminal went away: end of input
                chunk = b""
            try:
                anyio.from_thread.run_sync(send.send_nowait, chunk, token=token)
            except Exception:  # the chat ended meanwhile (Ctrl-C): nobody waits for this line
                pass

        threading.Thread(target=read, name="duckgraph-chat stdin", daemon=True).start()
        async with receive:
            return await receive.receive()


def _connection_loss(exc: BaseException) -> BaseException | None:
    """The MCP error or closed stream inside `exc` (the SDK wraps them in exception groups), if any."""
    from mcp import MCPError

    if isinstance(exc, BaseExceptionGroup):
        return next((found for e in exc.exceptions if (found := _connection_loss(e)) is not None), None)
    if isinstance(exc, (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, EOFError)):
        return exc
    return None


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _trace(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
