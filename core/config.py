"""Settings: built-in defaults < TOML file < DUCKGRAPH_* environment variables < explicit overrides."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.ports import ConfigError, InvalidInputError

ENV_PREFIX = "DUCKGRAPH_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: How a DUCKGRAPH_* variable says true or false; anything else is refused (a typo must not switch fetching on).
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
#: The `namespace` setting that makes each client's default namespace its first MCP root folder's name.
ROOTS_NAMESPACE = "@roots"


class PluginChoice(BaseModel):
    """Which plugin fills a port, and the options only that plugin receives."""

    model_config = ConfigDict(extra="forbid")
    use: str
    options: dict[str, Any] = Field(default_factory=dict)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    db: Path = Field(default_factory=lambda: default_data_dir() / "duckgraph.duckdb")
    #: The default namespace of tool calls, or "@roots": each client's first root folder's name.
    namespace: str = "default"
    #: With namespace = "@roots": the default namespace of a client that gives no roots.
    namespace_fallback: str = "default"
    store: PluginChoice = Field(default_factory=lambda: PluginChoice(use="duckdb"))
    embedder: PluginChoice = Field(default_factory=lambda: PluginChoice(use="sentence-transformers"))
    extractor: PluginChoice | None = None
    #: What `build_communities` finds communities with (ports/communities.py).
    community_detector: PluginChoice = Field(default_factory=lambda: PluginChoice(use="leiden"))
    #: Load the embedding model in the background as soon as the server starts.
    warm_up: bool = True
    #: Which MCP tools to expose: duckgraph's own, the reference memory server's, or both.
    tools: Literal["graphrag", "memory", "all"] = "graphrag"
    log_level: str = "WARNING"
    #: Bearer token every request to `duckgraph serve --http` must carry; required to listen beyond loopback.
    http_token: SecretStr | None = None
    #: The cosine similarity below which search finds nothing relevant; unset: the embedder's calibrated one.
    relevance_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Let the MCP tool add_urls fetch pages for the model (off: a server must opt in to reach the web).
    fetch_urls: bool = False
    #: Fetch URLs whose host is private, loopback or link-local (refused by default: see core/web/fetch.py).
    fetch_private_hosts: bool = False
    #: Seconds between two requests to one site while ingesting URLs (more when its robots.txt asks it).
    fetch_delay: float = Field(default=1.0, ge=0.0, le=60.0)
    #: After build_communities, have the host's model write reports through MCP sampling (clients that offer it).
    community_reports_by_sampling: bool = False

    @field_validator("db", mode="before")
    @classmethod
    def _db_is_a_file_name(cls, value: Any) -> Any:
        # Without this, a TOML list would become a file named "[1, 2]" and "" the current folder.
        if not isinstance(value, str | Path) or not str(value).strip():
            raise ValueError('must be the path of the knowledge file, such as "~/notes/memory.duckdb"')
        return Path(value).expanduser()

    @field_validator("log_level", mode="before")
    @classmethod
    def _known_log_level(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().upper() in LOG_LEVELS:
            return value.strip().upper()
        raise ValueError(f"must be {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}")

    @field_validator("namespace", "namespace_fallback")
    @classmethod
    def _valid_namespace(cls, value: str, info: Any) -> str:
        if info.field_name == "namespace" and value == ROOTS_NAMESPACE:
            return value
        try:
            return check_namespace(value)
        except InvalidInputError as exc:
            raise ValueError(str(exc) + (f", or {ROOTS_NAMESPACE!r}" if info.field_name == "namespace" else "")) from exc

    @property
    def from_roots(self) -> bool:
        return self.namespace == ROOTS_NAMESPACE

    @property
    def default_namespace(self) -> str:
        """The namespace of calls that name none, before any client's roots are known."""
        return self.namespace_fallback if self.from_roots else self.namespace

    @field_validator("http_token")
    @classmethod
    def _token_is_not_blank(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        token = value.get_secret_value().strip()
        if not token:
            raise ValueError("must not be blank (leave it unset for no token)")
        if any(ord(ch) < 33 or ord(ch) > 126 for ch in token):
            raise ValueError("must be printable ASCII without spaces (it travels in an HTTP header)")
        return SecretStr(token)


def default_data_dir() -> Path:
    import platformdirs  # only needed when no database path is configured

    return Path(platformdirs.user_data_dir("duckgraph", appauthor=False))


def default_config_file() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("duckgraph", appauthor=False)) / "config.toml"


def load_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Merge the layers; a wrong value anywhere is a ConfigError naming where it came from."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}

    explicit = config_file or env.get(ENV_PREFIX + "CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_file()
    if explicit and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    if path.is_file():
        import tomllib  # ~8 ms of regex compiling at import, for a file many setups do not have

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc

    _apply_env(data, env)
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(map(_problem, exc.errors()))
        sources = f"{path}, DUCKGRAPH_* variables or flags" if path.is_file() else "DUCKGRAPH_* variables or flags"
        raise ConfigError(f"invalid settings (from {sources}): {problems}") from exc


def _problem(error: Any) -> str:
    """One validation error as "log_level = 'LOUD': must be DEBUG, ...": the setting, the value given, what is
    allowed."""
    where = ".".join(map(str, error["loc"]))
    message = error["msg"].removeprefix("Value error, ")
    value = error.get("input")
    if error["type"] == "missing" or error["loc"][:1] == ("http_token",) or isinstance(value, dict):
        return f"{where}: {message}"  # nothing to show, or a secret
    return f"{where} = {value!r}: {message}"


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for key in ("db", "namespace", "namespace_fallback", "log_level", "tools", "http_token", "relevance_floor"):
        if value := env.get(ENV_PREFIX + key.upper()):
            data[key] = value
    for key in ("warm_up", "fetch_urls", "fetch_private_hosts", "community_reports_by_sampling"):
        if value := env.get(ENV_PREFIX + key.upper()):
            word = value.strip().lower()
            if word not in TRUE_WORDS + FALSE_WORDS:
                raise ConfigError(f"{ENV_PREFIX}{key.upper()} = {value!r}: must be true or false "
                                  f"({', '.join(TRUE_WORDS)}; or {', '.join(FALSE_WORDS)})")
            data[key] = word in TRUE_WORDS
    if value := env.get(ENV_PREFIX + "FETCH_DELAY"):
        data["fetch_delay"] = value
    for section in ("store", "embedder", "extractor", "community_detector"):
        use = env.get(ENV_PREFIX + section.upper())
        options = env.get(f"{ENV_PREFIX}{section.upper()}_OPTIONS")
        if not use and not options:
            continue
        current = dict(data.get(section) or {})
        if use and use != current.get("use"):
            # Options written for another plugin must not leak into this one.
            current = {"use": use}
        if options:
            try:
                parsed = json.loads(options)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{ENV_PREFIX}{section.upper()}_OPTIONS is not valid JSON: {exc}") from exc
            if not isinstance(parsed, dict):
                raise ConfigError(f"{ENV_PREFIX}{section.upper()}_OPTIONS must be a JSON object")
            current["options"] = {**current.get("options", {}), **parsed}
        if section not in data and "use" not in current:
            # Options alone are for the default plugin (duckdb, sentence-transformers, leiden); the extractor has none.
            default = Settings.model_fields[section].get_default(call_default_factory=True)
            if default is None:
                raise ConfigError(f"{ENV_PREFIX}{section.upper()}_OPTIONS is set but no {section} plugin is chosen: "
                                  f"set {ENV_PREFIX}{section.upper()} too (e.g. ollama)")
            current["use"] = default.use
        data[section] = current
