"""Run the CLI as `python -m driftgauge.cli`."""

from driftgauge.cli import main

raise SystemExit(main())
