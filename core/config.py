"""Settings: built-in defaults < TOML file < DUCKGRAPH_* environment variables < explicit overrides."""

from __future__ import annotations

import codecs
import difflib
import json
import logging
import math
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator

from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.ports import ConfigError, InvalidInputError

log = logging.getLogger(__name__)

ENV_PREFIX = "DUCKGRAPH_"
#: The settings a DUCKGRAPH_* variable sets as written, those it sets true or false, and the plugin sections
#: (DUCKGRAPH_EMBEDDER and DUCKGRAPH_EMBEDDER_OPTIONS, ...).
PLAIN_KEYS = ("db", "namespace", "namespace_fallback", "log_level", "tools", "http_token", "relevance_floor",
              "fetch_delay")
BOOLEAN_KEYS = ("warm_up", "fetch_urls", "fetch_private_hosts", "community_reports_by_sampling")
PLUGIN_SECTIONS = ("store", "embedder", "extractor", "community_detector")
#: The variables of the settings and of the config file: what a mistyped name is compared with.
SETTING_VARIABLES = (ENV_PREFIX + "CONFIG", *(ENV_PREFIX + key.upper() for key in PLAIN_KEYS + BOOLEAN_KEYS),
                     *(f"{ENV_PREFIX}{section.upper()}{suffix}" for section in PLUGIN_SECTIONS
                       for suffix in ("", "_OPTIONS")))
#: Every variable duckgraph reads, two of them no setting: where contrib/bench keeps its data sets, and where
#: tests/e2e/test_ui_browser.py saves its screenshots. Any other DUCKGRAPH_* variable is warned of.
KNOWN_VARIABLES = frozenset((*SETTING_VARIABLES, ENV_PREFIX + "BENCH_CACHE", ENV_PREFIX + "UI_SCREENSHOTS"))
#: What is left of a $NAME or ${NAME} that os.path.expandvars could not expand (the variable is not set).
_UNEXPANDED = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
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

    @field_validator("options")
    @classmethod
    def _numbers_are_finite(cls, options: dict[str, Any]) -> dict[str, Any]:
        # TOML's nan and inf, and JSON's NaN and Infinity (which json.loads takes), are numbers no option means:
        # refused here for every plugin rather than left to each (a store option of nan crashed at open).
        if name := _non_finite(options):
            raise ValueError(f"option {name} must be a number, not nan or infinity")
        return options


class Settings(BaseModel):
    # allow_inf_nan: every float setting, present and future, refuses nan and inf (from "nan" in a variable or nan
    # in TOML), which would otherwise be refused by a bound that does not say why, or pass where none is.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

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
    def _db_is_a_file_name(cls, value: Any, info: ValidationInfo) -> Any:
        # Without this, a TOML list would become a file named "[1, 2]" and "" the current folder.
        if not isinstance(value, str | Path) or not str(value).strip():
            raise ValueError('must be the path of the knowledge file, such as "~/notes/memory.duckdb"')
        # load_settings says where a db from the environment or a config file came from: those refuse a relative path.
        return expand_path(value, (info.context or {}).get("db_from"))

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


def _non_finite(value: Any, where: str = "") -> str | None:
    """The name (a.b[2]) of the first nan or infinite float in `value`'s options, None when there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        name = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else str(key)
        if (found := _non_finite(item, name)) is not None:
            return found
    return None


def expand_path(value: str | Path, refuse_relative_from: str | None = None) -> Path:
    """A path setting made absolute: ~ and $NAME or ${NAME} expanded, a variable that is not set refused (MCP
    clients pass env values and args as written, without a shell: "$HOME/notes" must not become a folder named
    "$HOME"). A relative path is taken from the current folder, or refused when it comes from
    `refuse_relative_from` (the environment or a config file): there the current folder is whichever one the MCP
    client starts duckgraph in, so each client or project would silently get a memory of its own. Raises
    ValueError saying what to write instead.

    A control character (a line break pasted with the path) or a blank at either end is refused, not stripped: it
    is easily not seen, and would name a file of its own; stripping it would quietly move to another file a user
    whose memory already has such a name."""
    expanded = os.path.expanduser(os.path.expandvars(str(value)))
    if control := next((ch for ch in expanded if unicodedata.category(ch) == "Cc"), None):
        raise ValueError(f"the path holds the control character {control!r} (a line break or tab copied with it?): "
                         "write the path without it")
    if expanded != expanded.strip():
        raise ValueError(f"the path {'starts' if expanded[:1].isspace() else 'ends'} with a blank: write it without "
                         "(a file name with blanks at its ends looks like another and is a file of its own; if one of "
                         "your files has such a name, rename it)")
    if unset := sorted({match.group(0) for match in _UNEXPANDED.finditer(expanded)}):
        raise ValueError(f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, so the path cannot be "
                         "expanded (MCP clients pass values as written, without a shell): write the whole path, "
                         "starting with / or ~/")
    path = Path(expanded)
    if not path.is_absolute() and refuse_relative_from is not None:
        raise ValueError(f"a relative path from {refuse_relative_from} would be taken from the folder duckgraph is "
                         "started in, which each MCP client chooses (each would silently get a memory of its own): "
                         "write the whole path, starting with / or ~/ (only a path given on the command line is "
                         "taken from the current folder)")
    return path.absolute()


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

    path = _config_file(config_file, env)
    explicit = path is not None
    path = path or default_config_file()
    if explicit and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    if path.is_file():
        import tomllib  # ~8 ms of regex compiling at import, for a file many setups do not have

        try:
            data = tomllib.loads(_config_text(path))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc

    db_from = f"the config file {path}" if "db" in data else None
    _apply_env(data, env)
    if env.get(ENV_PREFIX + "DB") is not None:
        db_from = ENV_PREFIX + "DB"
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
    if overrides.get("db") is not None:
        db_from = None  # --db: a relative path is the shell's current folder, as the user meant
    try:
        settings = Settings.model_validate(data, context={"db_from": db_from})
    except ValidationError as exc:
        problems = "; ".join(map(_problem, exc.errors()))
        sources = f"{path}, DUCKGRAPH_* variables or flags" if path.is_file() else "DUCKGRAPH_* variables or flags"
        raise ConfigError(f"invalid settings (from {sources}): {problems}") from exc
    if settings.log_level != "ERROR":
        # A --namespace flag chooses this command's namespace: a fallback set for the server (which shares the
        # environment and the file) is not this command's mistake.
        unused = unused_settings(settings) if overrides.get("namespace") is None else []
        for warning in unknown_variables(env) + unused:
            if warning not in _warned:  # once per process, though a command may load its settings twice
                _warned.add(warning)
                log.warning("%s", warning)
    return settings


_warned: set[str] = set()


def _config_text(path: Path) -> str:
    """The config file's text. A UTF-8 byte-order mark (which Windows editors write, and tomllib refuses) is
    dropped; a file in another encoding (Latin-1, UTF-16) is a ConfigError saying where, not a traceback."""
    raw = path.read_bytes()
    body = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + len(raw) - len(body)  # in the file as saved, the mark included
        line = raw.count(b"\n", 0, offset) + 1
        raise ConfigError(f"cannot read config file {path}: it is not UTF-8 (byte 0x{raw[offset]:02x} at offset "
                          f"{offset}, line {line}); save it as UTF-8") from exc


def _config_file(config_file: str | Path | None, env: Mapping[str, str]) -> Path | None:
    """The config file named by --config, else DUCKGRAPH_CONFIG (an empty one counts as unset), expanded as the db
    path is; None when neither names one."""
    if config_file is not None:
        if not str(config_file).strip():
            raise ConfigError("the config file's name is empty: name a TOML file, or leave --config out")
        where, value = None, config_file
    elif env.get(ENV_PREFIX + "CONFIG", "").strip():
        where, value = ENV_PREFIX + "CONFIG", env[ENV_PREFIX + "CONFIG"]
    else:
        return None
    try:
        return expand_path(value, where)
    except ValueError as exc:
        raise ConfigError(f"{where or 'config file'} = {str(value)!r}: {exc}") from exc


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each DUCKGRAPH_* variable that is no setting, with the setting it most resembles: a typo in
    a variable's name is otherwise ignored without a word, unlike an unknown key in the file."""
    env = os.environ if env is None else env
    warnings = []
    suffixes = {name.removeprefix(ENV_PREFIX): name for name in SETTING_VARIABLES}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in KNOWN_VARIABLES:
            continue
        # Compared without the prefix every name shares, which would make any two names look alike.
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX).upper(), suffixes, n=1)
        hint = f"did you mean {suffixes[close[0]]}?" if close else "the variables are listed in docs/configuration.md"
        warnings.append(f"{name} is not a duckgraph setting and is ignored: {hint}")
    return warnings


def unused_settings(settings: Settings) -> list[str]:
    """A warning for each setting given (in the file or the environment) that the others make ineffective, which
    would otherwise be ignored without a word: namespace_fallback is used only when namespace is @roots."""
    if "namespace_fallback" in settings.model_fields_set and not settings.from_roots:
        return [f"namespace_fallback = {settings.namespace_fallback!r} (DUCKGRAPH_NAMESPACE_FALLBACK or the config "
                f"file) has no effect: it is the namespace of an MCP client without roots when namespace is "
                f"{ROOTS_NAMESPACE}, and namespace is {settings.namespace!r}; set namespace (DUCKGRAPH_NAMESPACE) to "
                f"{ROOTS_NAMESPACE}, or remove namespace_fallback (see docs/namespaces.md)"]
    return []


def _problem(error: Any) -> str:
    """One validation error as "log_level = 'LOUD': must be DEBUG, ...": the setting, the value given, what is
    allowed."""
    where = ".".join(map(str, error["loc"]))
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "finite_number":  # pydantic's "should be a finite number" reads as if nan were a number
        message = "must be a number, not nan or infinity"
    value = error.get("input")
    if error["type"] == "missing" or error["loc"][:1] == ("http_token",) or isinstance(value, dict):
        return f"{where}: {message}"  # nothing to show, or a secret
    return f"{where} = {value!r}: {message}"


def _variable(env: Mapping[str, str], name: str) -> str | None:
    """A setting's variable, None when unset. Set but empty is refused, as the file's empty value is: a client's
    "DUCKGRAPH_DB": "" must not quietly mean the default file."""
    value = env.get(name)
    if value is not None and not value.strip():
        raise ConfigError(f"{name} is set but empty: give it a value, or remove it to use the default")
    return value


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for key in PLAIN_KEYS:
        if (value := _variable(env, ENV_PREFIX + key.upper())) is not None:
            data[key] = value
    for key in BOOLEAN_KEYS:
        if (value := _variable(env, ENV_PREFIX + key.upper())) is not None:
            word = value.strip().lower()
            if word not in TRUE_WORDS + FALSE_WORDS:
                raise ConfigError(f"{ENV_PREFIX}{key.upper()} = {value!r}: must be true or false "
                                  f"({', '.join(TRUE_WORDS)}; or {', '.join(FALSE_WORDS)})")
            data[key] = word in TRUE_WORDS
    for section in PLUGIN_SECTIONS:
        use = _variable(env, ENV_PREFIX + section.upper())
        options = _variable(env, f"{ENV_PREFIX}{section.upper()}_OPTIONS")
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
