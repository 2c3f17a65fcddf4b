"""`driftgauge serve`: run every check on its schedule, with /metrics and the REST API."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from driftgauge.cli.common import EXIT_OK, log_options, with_config
from driftgauge.config.frozen import Config


def add_commands(sub: Any) -> None:
    """Add `serve` to the CLI's subparsers."""
    srv = sub.add_parser("serve", help="run every check on its schedule; /metrics and REST API")
    with_config(srv)
    srv.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    # A string default goes through type=int, so a bad DRIFTGAUGE_PORT is a usage error.
    srv.add_argument(
        "--port",
        type=int,
        default=os.environ.get("DRIFTGAUGE_PORT", "8080"),
        help="port to listen on (default: $DRIFTGAUGE_PORT, else 8080)",
    )
    log_options(srv)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM."""
    serve(args.config, args.host, args.port, log_level=args.log_level, log_format=args.log_format)
    return EXIT_OK


async def _reach_state(config: Config) -> None:
    """Open and close the state store once, so a bad state.dsn fails before serving."""
    from driftgauge.state.store import StateStore

    store = await StateStore.open(config.state)
    await store.close()


def serve(
    config_path: str, host: str, port: int, *, log_level: str = "INFO", log_format: str = "json"
) -> None:
    """Load the config, check the state database and serve until SIGINT/SIGTERM.

    Raises ConfigError or StateError (with the field and the problem) before serving; the
    config is checked exactly as `driftgauge config validate` checks it.
    """
    import uvicorn

    from driftgauge import logs
    from driftgauge.app.service import create_app
    from driftgauge.startup import load_service_config

    logs.configure(log_level, log_format)
    config = load_service_config(config_path)
    asyncio.run(_reach_state(config))
    app = create_app(config)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=15,
        lifespan="on",
    )
