"""Run a consumer's re-trigger command or a partition step as a shell command, bounded."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

COMMAND_DEADLINE = 3600.0


async def run_shell(command: str, env: Mapping[str, str]) -> tuple[bool, str]:
    """Run `command` in a shell with `env` added; return (exit 0, a one-line outcome)."""
    proc = await asyncio.create_subprocess_shell(
        command,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(COMMAND_DEADLINE):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False, f"{command!r}: no exit within {COMMAND_DEADLINE:g}s (killed)"
    tail = " ".join(out.decode(errors="replace").split())[-300:]
    return proc.returncode == 0, f"{command!r}: exit {proc.returncode}" + (
        f": {tail}" if tail else ""
    )
