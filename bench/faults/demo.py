"""`make demo`: driftgauge serve watching a week of the fault bench's sync job.

`driftgauge serve` starts on a fresh database and index. The bench's sync job then copies
review labels from PostgreSQL onto OpenSearch documents for the seven days ending
yesterday, reporting every run to the service's run ledger over HTTP. From day 4 the
upstream labels a tenth of its reviews with a tier the dashboard's filter does not know;
every run still says status=success and the ledger sees nothing wrong. Seconds after each
run's summary the service reconciles its window, and the drift shows up in the day table,
in /metrics and in the drill-down API. Ctrl-C stops the service and drops the demo's
database and index; without a terminal the service stops after the summary unless
--serve-for SECONDS keeps it up. DEMO_PORT chooses its port (default: a free one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx
import yaml

from faults import checks as bench_checks
from faults import demo_summary
from faults.bench import index_all_conversations
from faults.faults import VocabularyDrift
from faults.syncjob import JOB, SyncJob
from faults.world import (
    OS_URL,
    PG_DSN,
    TIMEOUT,
    Shape,
    SimClock,
    Stores,
    at,
    create_stores,
    day_start,
    drop_stores,
    insert_tasks,
    os_client,
    run_tag,
    unique_stores,
    use_epoch,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAYS = 7
ONSET = 4
RATE = 0.10
TOKEN = "demo-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_config(stores: Stores) -> Path:
    """Write the bench's check for the service: a token, reconciled seconds after a run."""
    doc = bench_checks.config_dict(stores, (bench_checks.MAIN,))
    doc["api"].update({"tokens": [TOKEN], "public_read": True})
    check = doc["checks"][bench_checks.MAIN]
    check["schedule"]["recent"] = {"every": "1m", "days": DAYS + 1}
    check["ledger"]["settle"] = "5s"
    path = ROOT / ".local" / "demo-faults.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def serve(config: Path, port: int) -> subprocess.Popen[bytes]:
    """Start `driftgauge serve` and wait until it is ready."""
    log = (ROOT / ".local" / "demo-faults-serve.log").open("wb")
    proc = subprocess.Popen(
        [
            str(BIN / "driftgauge"),
            "serve",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"driftgauge serve exited with {proc.returncode}; see {log.name}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"driftgauge serve was not ready within 60 s; see {log.name}")


async def sync_week(stores: Stores, base: str) -> None:
    """Run the sync job for every day, each run reported to the service's ledger."""
    shape = Shape()
    fault = VocabularyDrift(RATE)
    await index_all_conversations(stores, DAYS, shape)
    clock = SimClock(day_start(0))
    pool = await asyncpg.create_pool(stores.dsn, min_size=1, max_size=1, timeout=TIMEOUT)
    client = os_client()
    try:
        job = SyncJob(clock, pool, client, stores.index, base, ledger_token=TOKEN)
        for day in range(DAYS):
            tasks = fault.tasks(day, shape, ONSET)
            async with pool.acquire() as conn:
                await insert_tasks(conn, tasks)
            clock.advance_to(at(day + 1, 1))
            report = await job.run(day)
            mark = "   <- the upstream's new tier from here" if day == ONSET else ""
            print(f"  sync {day_start(day).date()}: {report.line}{mark}")
    finally:
        await client.close()
        await pool.close()


def get(base: str, path: str) -> Any:
    """Return a JSON answer of the service."""
    resp = httpx.get(base + path, headers=AUTH, timeout=TIMEOUT)
    resp.raise_for_status()
    return resp.json()


def wait_for_verdicts(base: str, first: date, last: date, limit: float = 180.0) -> list[Any]:
    """Wait until a completed run has judged every synced day, the last included.

    The service reconciles after each ledger run, so the run that judges the last day may
    still be going when the others are stored: the summary waits for it, or it would
    disagree with the table `driftgauge check` prints below it.
    """
    deadline = time.monotonic() + limit
    days: list[Any] = []
    while time.monotonic() < deadline:
        days = get(base, f"/api/v1/checks/reviews/days?since={first}&until={last}")["days"]
        if not demo_summary.unjudged(days, first, last):
            return days
        time.sleep(1)
    return days


def urls(base: str, first: date, day: str) -> list[str]:
    """Return the demo's URLs to open, the page first."""
    return [
        f"{base}/",
        f"{base}/metrics",
        f"{base}/api/v1/checks/reviews/days?since={first}",
        f"{base}/api/v1/checks/reviews/days/{day}",
        f"{base}/api/v1/checks/reviews/days/{day}/keys?kind=missing"
        f"   (header: Authorization: Bearer {TOKEN})",
        f"{base}/api/v1/ledger/runs?job={JOB}",
    ]


def serve_for(given: float | None, tty: bool) -> float | None:
    """Return how long to serve after the summary: None until Ctrl-C, 0 not at all."""
    if given is not None:
        return given
    return None if tty else 0.0


def port() -> int:
    """Return DEMO_PORT when set, else a free port."""
    chosen = os.environ.get("DEMO_PORT", "").strip()
    if not chosen:
        return _free_port()
    if not chosen.isdigit() or not 0 < int(chosen) < 65536:
        raise SystemExit(f"DEMO_PORT={chosen!r}: not a TCP port (1-65535)")
    return int(chosen)


def _interrupted(signum: int, frame: object) -> None:
    # A plain `kill` stops the demo like Ctrl-C: the finally block drops its stores.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return the exit status."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-wait", action="store_true", help="stop at once (--serve-for 0)")
    p.add_argument(
        "--serve-for",
        type=float,
        metavar="SECONDS",
        help="serve this long after the summary (default: until Ctrl-C at a terminal, "
        "else stop at once)",
    )
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    use_epoch(today - timedelta(days=DAYS))
    stores = unique_stores(run_tag(), "demo")
    print(
        f"driftgauge demo: PostgreSQL {PG_DSN.rsplit('@', 1)[-1]}, OpenSearch {OS_URL}; "
        f"database {stores.database}, index {stores.index}"
    )
    proc: subprocess.Popen[bytes] | None = None
    try:
        asyncio.run(create_stores(stores))
        config = write_config(stores)
        chosen = port()
        base = f"http://127.0.0.1:{chosen}"
        proc = serve(config, chosen)
        print(f"driftgauge serve is up at {base} ({config.relative_to(ROOT)})\n")
        print(
            f"The sync job, one run a day; from {day_start(ONSET).date()} {RATE:.0%} of the "
            "labels carry a tier the dashboard does not know:"
        )
        asyncio.run(sync_week(stores, base))
        canary = httpx.post(f"{base}/api/v1/canary/reviews", headers=AUTH, timeout=TIMEOUT).json()
        print(
            f"\ncanary (write as the job, read back through the dashboard's filter): "
            f"{canary.get('result')} {canary.get('detail') or ''}".rstrip()
        )
        first, last = day_start(0).date(), day_start(DAYS - 1).date()
        days = wait_for_verdicts(base, first, last)
        windows = get(base, f"/api/v1/ledger/windows?job={JOB}&limit={DAYS}")
        breaches = sorted({b for w in windows for b in w["breaches"]})
        print(
            f"run ledger: {len(windows)} windows judged, breaches: {', '.join(breaches) or 'none'}"
        )
        drifted = [d["day"] for d in days if d["status"] == "drift"]
        print(
            "reconciliation (run by the service after each ledger run): "
            + demo_summary.summary(days, first, last)
        )
        print(
            f"\n$ driftgauge check reviews --config {config.relative_to(ROOT)} "
            f"--since {first} --until {last}",
            flush=True,
        )
        subprocess.run(
            [
                str(BIN / "driftgauge"),
                "check",
                "reviews",
                "--config",
                str(config),
                "--since",
                str(first),
                "--until",
                str(last),
            ],
            check=False,
        )
        day = drifted[0] if drifted else str(day_start(ONSET).date())
        links = "\n".join(f"  {u}" for u in urls(base, first, day))
        # Serve on only for someone at a terminal or who asked; a script gets its exit status.
        seconds = serve_for(0.0 if args.no_wait else args.serve_for, sys.stdin.isatty())
        if seconds == 0:
            proc.terminate()
            print(
                "\nThe service has stopped (no terminal; --serve-for SECONDS keeps it up). "
                f"While it ran it answered at:\n{links}"
            )
        elif seconds is None:
            print(f"\nWhile it runs:\n{links}")
            print("\nCtrl-C stops the service and drops the demo's database and index.")
            with contextlib.suppress(KeyboardInterrupt):
                proc.wait()
        else:
            print(f"\nWhile it runs (for {seconds:g} s more; Ctrl-C stops it sooner):\n{links}")
            with contextlib.suppress(KeyboardInterrupt, subprocess.TimeoutExpired):
                proc.wait(timeout=seconds)
        return 0 if drifted and not demo_summary.unjudged(days, first, last) else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        asyncio.run(drop_stores(stores))


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
