"""Run the driftgauge service (scheduler, /metrics, REST API) under uvicorn."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from driftgauge.cli import main as cli_main


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
    log_args = [
        f"--{k}={v}"
        for k, v in (("log-level", args.log_level), ("log-format", args.log_format))
        if v
    ]
    return cli_main(
        ["serve", "--config", args.config, "--host", args.host, "--port", str(args.port), *log_args]
    )


if __name__ == "__main__":
    raise SystemExit(main())
