"""The few calls to an OpenAI-compatible API the plugin makes: deadlines, retries, and errors that say what to do.

The API key is read from an environment variable on each request and sent only in the Authorization header;
every text that leaves this module (errors, logs) has it removed, whatever the server echoes back.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from duckgraph.ports import ConfigError
from duckgraph.ports.http import redact_urls, request

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: Answers worth another try: rate limits and the server's own failures.
RETRIED = frozenset({429, 500, 502, 503, 504})
#: A server asking for a longer pause than this is waited for this long at most.
MAX_RETRY_AFTER = 60.0


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


#: Each option's check and what it allows, for both components: values come from TOML or JSON, of any type.
OPTIONS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model": (_text, "a model name"),
    "base_url": (lambda v: _text(v) and v.startswith(("http://", "https://")), "an http:// or https:// address"),
    "api_key_env": (_text, "the name of an environment variable"),
    "timeout": (lambda v: _number(v) and v > 0, "a number of seconds above 0"),
    "backoff": (lambda v: _number(v) and v >= 0, "a number of seconds, at least 0"),
    "temperature": (lambda v: _number(v) and v >= 0, "a number, at least 0"),
    "max_retries": (lambda v: _whole(v) and v >= 0, "a whole number, at least 0"),
    "max_attempts": (lambda v: _whole(v) and v >= 1, "a whole number, at least 1"),
    "batch_size": (lambda v: _whole(v) and v >= 1, "a whole number, at least 1"),
    "dimensions": (lambda v: v is None or (_whole(v) and v >= 1), "a whole number, at least 1 (or left out)"),
}


def check_options(component: str, **values: Any) -> None:
    """A ConfigError naming the component (e.g. "embedder 'openai'"), the option and what it allows, for the
    first value out of bounds: a plugin's bad option must read like the core's, not end in a traceback."""
    for name, value in values.items():
        ok, allowed = OPTIONS[name]
        if not ok(value):
            raise ConfigError(f"bad options for {component}: {name} must be {allowed}, not {redact_urls(repr(value))}")


class OpenAIClient:
    """One OpenAI-compatible server. `timeout` bounds each request as a whole (connecting, waiting, every byte
    read), so a server that answers a byte now and then cannot hold a write forever; each retry gets a fresh
    deadline. 429 and 5xx answers are retried `max_retries` times, waiting `backoff` seconds doubled each time
    (or the server's Retry-After). `rate_limit_advice` names what the component's own options can do about a
    429 that outlasts the retries. The options are checked by the components (check_options)."""

    def __init__(self, base_url: str, *, timeout: float, max_retries: int, backoff: float, api_key_env: str,
                 error: type[Exception], rate_limit_advice: str) -> None:
        self.base_url = base_url.rstrip("/")
        #: The server as messages and logs show it: a password or token in base_url stays out of them.
        self.shown_url = redact_urls(self.base_url)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.api_key_env = api_key_env
        self._error = error
        self._rate_limit_advice = rate_limit_advice

    def key_status(self) -> str:
        """Where the key comes from and whether it is set, never the key."""
        return f"${self.api_key_env} ({'set' if os.environ.get(self.api_key_env) else 'not set'})"

    def get(self, path: str) -> dict[str, Any]:
        return self._call("GET", path, None)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        for attempt in range(self.max_retries + 1):
            response = self._send(method, path, body)
            if response.status_code not in RETRIED or attempt == self.max_retries:
                break
            pause = self._pause(response, attempt)
            log.info("%s%s answered HTTP %d; retry %d/%d in %.1f s", self.shown_url, path, response.status_code,
                     attempt + 1, self.max_retries, pause)
            time.sleep(pause)
        if response.status_code >= 400:
            error = self._error(self._redact(self._explain(response, path, body)))
            error.status = response.status_code  # type: ignore[attr-defined]  # what a caller may tell apart
            raise error
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise self._error(f"{self.shown_url}{path} answered with something that is not a JSON object: check "
                              "base_url points at an OpenAI-compatible API (usually ending in /v1)")
        return reply

    def _pause(self, response: httpx.Response, attempt: int) -> float:
        try:
            asked = float(response.headers.get("retry-after", ""))
        except ValueError:
            asked = None
        if asked is not None and asked >= 0:
            return min(asked, MAX_RETRY_AFTER)
        return self.backoff * 2**attempt

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        import anyio  # imported on first call (for its errors): registering the plugin stays cheap
        import httpx

        url, shown = f"{self.base_url}{path}", f"{self.shown_url}{path}"
        headers = {"Accept": "application/json"}
        if key := os.environ.get(self.api_key_env, "").strip():
            headers["Authorization"] = f"Bearer {key}"
        try:
            return request(method, url, timeout=self.timeout, json=body, headers=headers)
        except (TimeoutError, httpx.TimeoutException):
            raise self._error(f"{shown} did not answer within the {self.timeout:g} s deadline (the timeout option, "
                              "for the whole request): raise the timeout option or try again") from None
        except httpx.ConnectError:
            raise self._error(f"cannot reach {self.shown_url}: is the server running? Set the base_url option to "
                              "its OpenAI-compatible API, e.g. http://127.0.0.1:1234/v1") from None
        except (httpx.HTTPError, anyio.BrokenResourceError, OSError) as exc:
            raise self._error(self._redact(f"request to {shown} failed: {exc}")) from None

    def _explain(self, response: httpx.Response, path: str, body: dict[str, Any] | None) -> str:
        status, said = response.status_code, _server_message(response)
        model = (body or {}).get("model", "")
        if status in (401, 403):
            if not os.environ.get(self.api_key_env, "").strip():
                return (f"{self.shown_url} needs an API key (HTTP {status}) and ${self.api_key_env} is not set: set "
                        "it, or name the variable that holds the key with the api_key_env option")
            return (f"{self.shown_url} refused the API key in ${self.api_key_env} (HTTP {status}): set a valid key "
                    f"there; the server said: {said}")
        if status == 404 and model and ("model" in said.lower() or "model_not_found" in response.text):
            return (f"{self.shown_url} has no model {model!r} (HTTP 404): check the model option; "
                    f"{self.shown_url}/models lists what it serves. The server said: {said}")
        if status == 404:
            return (f"{self.shown_url}{path} does not exist (HTTP 404): check the base_url option; OpenAI-compatible "
                    "servers serve the API under /v1 (e.g. http://127.0.0.1:11434/v1 for Ollama)")
        retries = self.max_retries
        if status == 429:
            tried = (f"still after {retries} {'retry' if retries == 1 else 'retries'}" if retries else
                     "not retried with max_retries 0")
            return (f"{self.shown_url} is rate limiting (HTTP 429), {tried}: wait and try again, "
                    f"{self._rate_limit_advice}. The server said: {said}")
        if status >= 500:
            times = "once" if retries == 0 else f"{retries + 1} times"
            return (f"{self.shown_url} failed with HTTP {status} on {path}, {times}: try again later. "
                    f"The server said: {said}")
        return f"{self.shown_url} answered {path} with HTTP {status}: {said}"

    def _redact(self, text: str) -> str:
        """The text without the API key, nor credentials of a URL in it (an httpx error may quote the URL)."""
        key = os.environ.get(self.api_key_env, "").strip()
        return redact_urls(text.replace(key, "[redacted]") if len(key) >= 4 else text)


def _server_message(response: httpx.Response) -> str:
    """OpenAI's {"error": {"message": ...}}, the {"error": "..."} of some servers, or the start of the text."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return response.text.strip()[:300] or "(no message)"
    if isinstance(error, dict):
        error = error.get("message")
    return str(error)[:300] if error else response.text.strip()[:300]
