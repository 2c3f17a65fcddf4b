"""Run the driftgauge service (scheduler, /metrics, REST API) under uvicorn."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import uvicorn

from driftgauge import logs
from driftgauge.api import create_app
from driftgauge.config.runtime import Config
from driftgauge.startup import load_service_config
from driftgauge.state.store import StateStore


async def _reach_state(config: Config) -> None:
    """Open and close the state store once, so a bad state.dsn fails before serving."""
    store = await StateStore.open(config.state)
    await store.close()


def serve(config_path: str, host: str, port: int, *, log_level: str = "INFO",
          log_format: str = "json") -> None:
    """Load the config, check the state database and serve until SIGINT/SIGTERM.

    Raises ConfigError or StateError (with the field and the problem) before serving; the
    config is checked exactly as `driftgauge config validate` checks it.
    """
    logs.configure(log_level, log_format)
    config = load_service_config(config_path)
    asyncio.run(_reach_state(config))
    app = create_app(config)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False,
                timeout_graceful_shutdown=15, lifespan="on")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `--config/--host/--port` and serve; return the exit status."""
    p = argparse.ArgumentParser(prog="python -m driftgauge.server", description=__doc__)
    p.add_argument("--config", required=True, help="config file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8080, help="port to listen on")
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR (as driftgauge serve)")
    p.add_argument("--log-format", help="json or text (as driftgauge serve)")
    args = p.parse_args(argv)
    # The same error handling and exit codes as `driftgauge serve`.
    from driftgauge.cli import main as cli_main

    log_args = [f"--{k}={v}" for k, v in (("log-level", args.log_level),
                                           ("log-format", args.log_format)) if v]
    return cli_main(["serve", "--config", args.config, "--host", args.host,
                     "--port", str(args.port), *log_args])


if __name__ == "__main__":
    raise SystemExit(main())
