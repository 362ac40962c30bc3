"""Fetching one URL safely: http(s) only; hosts that resolve to private, loopback or link-local addresses refused
unless allowed (a server that fetches for a model must not reach the machine's own network); every redirect
checked again; a clear User-Agent; bodies bounded.

The host's name is looked up once, here, and the connection goes to the address that was checked: the request's
URL names that address, while its Host header and the TLS server name (httpx's `sni_hostname` extension, which
the certificate is also verified against) keep the name. So a name that answers a second lookup differently (DNS
rebinding) cannot lead the request elsewhere."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from duckgraph.core import __version__
from duckgraph.ports import DuckgraphError

USER_AGENT = f"duckgraph/{__version__} (a local memory fetching pages its user asked for)"
MAX_BYTES = 20 * 2**20
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 20.0
PRIVATE_HINT = "set fetch_private_hosts = true (DUCKGRAPH_FETCH_PRIVATE_HOSTS=1) to allow them"


class FetchError(DuckgraphError):
    """A URL that was not fetched, and why; `status`: the HTTP status that answered, if one did."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Response:
    url: str  # after redirects
    media_type: str
    body: bytes
    encoding: str
    last_modified: str | None


class Fetcher:
    def __init__(self, *, allow_private: bool = False, timeout: float = TIMEOUT_SECONDS) -> None:
        self.allow_private = allow_private
        self.timeout = timeout
        # One client (connection pool) per host name: pools are keyed by the address connected to, and a
        # connection whose TLS was set up (and its certificate verified) for one name must not carry another's
        # requests, as it would for two names at one address.
        self.clients: dict[str, httpx.Client] = {}

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def _client(self, host: str) -> httpx.Client:
        if host not in self.clients:
            # Redirects are followed here, not by httpx, so that each target is checked before it is asked.
            self.clients[host] = httpx.Client(follow_redirects=False, timeout=self.timeout,
                                              headers={"User-Agent": USER_AGENT})
        return self.clients[host]

    def get(self, url: str) -> Response:
        for _ in range(MAX_REDIRECTS + 1):
            address = check_url(url, self.allow_private)
            try:
                named = httpx.URL(url)
                host = named.raw_host.decode("ascii")
                with self._client(host).stream("GET", named.copy_with(host=address),
                                               headers={"Host": named.netloc.decode("ascii")},
                                               extensions={"sni_hostname": host}) as answer:
                    if answer.is_redirect and "location" in answer.headers:
                        url = urljoin(url, answer.headers["location"])
                        continue
                    if answer.status_code >= 400:
                        raise FetchError(f"HTTP {answer.status_code} {answer.reason_phrase}", answer.status_code)
                    return _response(url, answer)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise FetchError(f"cannot fetch it: {type(exc).__name__}: {exc}") from exc
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _response(url: str, answer: httpx.Response) -> Response:
    body = bytearray()
    for piece in answer.iter_bytes():
        body += piece
        if len(body) > MAX_BYTES:
            raise FetchError(f"larger than {MAX_BYTES // 2**20} MB")
    media_type = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    return Response(url=url, media_type=media_type, body=bytes(body), encoding=answer.encoding or "utf-8",
                    last_modified=answer.headers.get("last-modified"))


def check_url(url: str, allow_private: bool) -> str:
    """The address to connect to for `url`; FetchError for what may not be fetched (see the module)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("only http:// and https:// URLs are fetched")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = resolve(parts.hostname, port)
    except (OSError, ValueError) as exc:
        raise FetchError(f"cannot resolve {parts.hostname}: {exc}") from exc
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global and not allow_private:
            raise FetchError(f"{parts.hostname} is a private, loopback or link-local address ({ip}); "
                             f"{PRIVATE_HINT}")
    return addresses[0]


def resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, in the order the system prefers them (at least one, else OSError)."""
    found = [info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)]
    return list(dict.fromkeys(found))
