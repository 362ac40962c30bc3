"""What every `duckgraph` command starts from: its settings, and the services built from them. Shared by
core/cli.py and the command modules beside this one, which therefore never import core/cli.py."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from duckgraph.core.cli_checks import say_roots_fallback
from duckgraph.ports import ConfigError, DuckgraphError


def setup(args: argparse.Namespace, *, existing: bool = False, **overrides: Any):
    """The services for this command. `existing`: the command reads (or changes) what is stored, so it refuses a
    database file that is not there rather than create an empty one (and its folders), with which a mistyped
    --db would "succeed"."""
    from duckgraph.core.bootstrap import bootstrap

    services = bootstrap(settings(args, **overrides))  # opens nothing; says first what is wrong in the settings
    say_roots_fallback(args, services.settings)
    if existing:
        from duckgraph.core.files.paths import refuse_dangling_link

        path = Path(services.settings.db).expanduser()
        refuse_dangling_link(path)  # the memory is not missing, the link's target is: say so, as writing does
        if not path.exists():
            raise DuckgraphError(f"no memory at {path}: check --db / DUCKGRAPH_DB (or the config file's db); "
                                 "`duckgraph doctor` shows which file is used. Nothing was created")
    return services


def settings(args: argparse.Namespace, **overrides: Any):
    """The layered settings for this command, with logging to stderr set up at their level."""
    from duckgraph.core.config import ENV_PREFIX, expand_path, load_settings
    from duckgraph.core.files.paths import refuse_as_database

    config = args.config or os.environ.get(ENV_PREFIX + "CONFIG")
    try:  # expanded as load_settings does ($HOME, ~), which would say a folder "does not exist"
        folder = expand_path(config) if config and config.strip() else None
    except ValueError:  # an unset variable, a blank at an end: load_settings says so
        folder = None
    if folder is not None and folder.is_dir():
        raise ConfigError(f"config file {folder} is a folder: give the TOML file's path with --config "
                          f"(DUCKGRAPH_CONFIG), e.g. {folder / 'config.toml'}")
    db = overrides.pop("db", None)
    loaded = load_settings(args.config, db=args.db if db is None else db,
                           log_level=args.log_level, namespace=getattr(args, "namespace", None), **overrides)
    # A server whose database is a folder reaches the handshake: the store's open says what is wrong in every tool
    # call's answer (plugins/duckdb/connection.py), where the host shows it, as for the file's other problems.
    if not (args.command == "serve" and Path(loaded.db).expanduser().is_dir()):
        refuse_as_database(loaded.db)
    logging.basicConfig(
        level=loaded.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return loaded
