"""Each fact counted once: 1, 2 and 3 replicas on one state database, one real Prometheus.

One `driftgauge serve` finds planted drift (a full pass, a recent run, a canary and a ledger
run that breaches a rule), then a real Prometheus scrapes it alone, then with a second and a
third replica on the same state database. Every dashboard panel and every alert expression
must give the same answer each time: only the elected replica exports the stored series,
so a sum over replicas counts each run and bucket once.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest
import yaml

# tests/deploy is no package; mypy reads it under its own names (see pyproject.toml).
from tests.deploy.dashboard_queries import panel_queries  # type: ignore[import-not-found]
from tests.e2e import test_dashboard_live as dash
from tests.e2e.prometheus import needs_prometheus, start_prometheus, write_scrape_config
from tests.e2e.support import (
    OS_URL,
    Samples,
    dump_log,
    free_port,
    past_days,
    sample,
    scrape,
    scratch_database,
    scratch_index,
    start_replica,
    stop,
    until,
    wait_ready,
    write_config,
)

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "driftgauge-rules.yml"
pytestmark = [pytest.mark.e2e, needs_prometheus]
REPLICAS = 3
SCRAPES = 5
"""Scrapes of the newest replica Prometheus must hold before the queries run."""
# The dashboard test's check, with no schedule falling due during the test: the stored
# results are those of the runs the test starts, whatever the number of replicas.
CONFIG = (
    dash.CONFIG.replace("schema: driftgauge_dashboard_e2e", "schema: driftgauge_fleet_e2e")
    .replace("recent: {every: 2s, days: 4}", "recent: {every: 1d, days: 4}")
    .replace("every: 1h,", "every: 1d,")
)
Answer = dict[frozenset[tuple[str, str]], float]


@dataclass
class Fleet:
    """The config every replica serves, their ports, and where their logs go."""

    config: Path
    ports: list[int]
    tmp: Path
    days: list[date]
    procs: list[subprocess.Popen[bytes]]

    def url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.ports[n]}"

    def log(self, n: int) -> Path:
        return self.tmp / f"serve-{n}.log"

    async def start(self, n: int) -> None:
        """Start replica n and wait until it is ready."""
        proc = start_replica(self.config, self.ports[n], self.log(n))
        self.procs.append(proc)
        async with httpx.AsyncClient(timeout=10) as http:
            await wait_ready(http, self.url(n), proc, self.log(n))


@asynccontextmanager
async def fleet(tmp: Path) -> AsyncIterator[Fleet]:
    """Yield the source table, the drifting reader index and room for the replicas."""
    days = past_days(dash.DAYS)
    rows = dash.make_rows(days)
    async with (
        scratch_index("dg_e2e_fleet") as (client, index),
        scratch_database("dg_e2e_fleet") as dsn,
    ):
        await dash.load_both(client, index, dsn, rows)
        config = write_config(tmp, CONFIG, DSN=dsn, OS=OS_URL, TOKEN=dash.TOKEN, INDEX=index)
        found = Fleet(config, [free_port() for _ in range(REPLICAS)], tmp, days, [])
        try:
            yield found
        finally:
            for proc in found.procs:
                stop(proc)


async def run_recent(http: httpx.AsyncClient) -> None:
    """Start one recent-window run, waiting out the full pass that may hold the check."""

    async def started() -> bool:
        resp = await http.post(f"/api/v1/checks/{dash.CHECK}/runs", headers=dash.AUTH)
        assert resp.status_code in (202, 409), resp.text
        return resp.status_code == 202

    await until("a recent run to start", started, limit=60)


def write_prometheus_config(tmp: Path, ports: list[int]) -> Path:
    """Write the scrape config of the replicas on `ports`, scraped every second."""
    job = {
        "job_name": "driftgauge",
        "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
    }
    return write_scrape_config(tmp, job)


def start_scraping(tmp: Path, ports: list[int], port: int) -> subprocess.Popen[bytes]:
    """Start Prometheus on `port` scraping `ports` into a scratch TSDB."""
    return start_prometheus(tmp, write_prometheus_config(tmp, ports), port)


def alert_exprs() -> dict[str, str]:
    """Return every alert's expression of the generated plain rules, by alert name."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "alert" in r}


def expressions() -> dict[str, str]:
    """Return every panel target and alert expression that must not depend on the replicas.

    The Replicas row's panels (those filtered by $instance) are each replica's own work,
    one series per replica by design; they are checked apart.
    """
    out = {}
    for q in panel_queries(
        check=dash.CHECK, rate_interval="1m", range_="5m", extra={"__interval": "15s"}
    ):
        if 'instance=~".+"' not in q.expr:
            out[f"panel {q.panel_title!r} [{q.ref_id}]"] = q.expr
    for name, expr in alert_exprs().items():
        out[f"alert {name}"] = expr
    return out


async def evaluate(prom: httpx.AsyncClient, exprs: dict[str, str]) -> dict[str, Answer]:
    """Evaluate each expression as an instant query; fail naming one Prometheus refuses."""
    answers = {}
    for where, expr in exprs.items():
        got = (await prom.get("/api/v1/query", params={"query": expr})).json()
        assert got.get("status") == "success", f"{where}: {got.get('error')}\n    {expr}"
        data = got["data"]
        result = data["result"] if data["resultType"] == "vector" else []
        answers[where] = {frozenset(r["metric"].items()): float(r["value"][1]) for r in result}
    return answers


def differences(
    base: dict[str, Answer], now: dict[str, Answer], exprs: dict[str, str], elapsed: float
) -> list[str]:
    """Return how `now` differs from `base`; time() moves on by at most `elapsed` seconds."""
    out = []
    for where, want in base.items():
        got = now[where]
        slack = elapsed + 2 if "time()" in exprs[where] else 1e-9
        same = set(got) == set(want) and all(abs(got[k] - want[k]) <= slack for k in want)
        if not same:
            out.append(f"{where}:\n    with 1 replica: {want}\n    now: {got}")
    return out


async def scraped(
    prom: httpx.AsyncClient, proc: subprocess.Popen[bytes], tmp: Path, n: int
) -> None:
    """Wait until Prometheus scrapes n replicas, the newest of them SCRAPES times."""

    async def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError("prometheus exited:\n" + dump_log(tmp / "prometheus.log"))
        try:
            if (await prom.get("/-/ready")).status_code != 200:
                return False
            got = (
                await prom.get(
                    "/api/v1/query",
                    params={"query": 'min(count_over_time(up{job="driftgauge"}[1m]) * up)'},
                )
            ).json()
            count = (
                await prom.get(
                    "/api/v1/query", params={"query": 'count(up{job="driftgauge"} == 1)'}
                )
            ).json()
        except httpx.TransportError:
            return False
        low, up = got["data"]["result"], count["data"]["result"]
        return (
            bool(low and up)
            and float(low[0]["value"][1]) >= SCRAPES
            and up[0]["value"][1] == str(n)
        )

    await until(f"{n} replicas scraped {SCRAPES} times", ready, limit=60)


async def instant_value(prom: httpx.AsyncClient, expr: str) -> list[float]:
    got = (await prom.get("/api/v1/query", params={"query": expr})).json()
    return sorted(float(r["value"][1]) for r in got["data"]["result"])


async def test_one_two_and_three_replicas_give_every_panel_and_alert_the_same_answer(
    tmp_path: Path,
) -> None:
    async with AsyncExitStack() as stack:
        f = await stack.enter_async_context(fleet(tmp_path))
        await f.start(0)
        live = dash.Live(f.url(0), f.ports[0], f.log(0), f.days)
        async with httpx.AsyncClient(base_url=f.url(0), timeout=10) as http:
            await dash.feed_the_audit(http, live)
            await run_recent(http)

            seen: list[float] = []

            async def fed() -> Samples | None:
                s = await scrape(http, f.url(0))
                ran = sum(
                    sample(s, "driftgauge_check_runs_total", check=dash.CHECK, status=st) or 0
                    for st in ("ok", "drift", "error", "nothing_judged")
                )
                seen.append(ran)
                # The closed ledger run starts a reconciliation too: wait until runs stop.
                settled = len(seen) > 8 and ran >= 2 and seen[-8] == ran
                yesterday = live.days[-1].isoformat()
                found = (
                    sample(
                        s, "driftgauge_bucket_rows", check=dash.CHECK, day=yesterday, kind="missing"
                    )
                    is not None
                    and sample(s, "driftgauge_canary_up", check=dash.CHECK) is not None
                    and sample(
                        s, "driftgauge_ledger_breach", sync_job=dash.JOB, rule="no_match_rate"
                    )
                    == 1
                )
                return s if found and settled else None

            s = await until("both runs and the audit series on /metrics", fed, limit=90)
        yesterday = f.days[-1].isoformat()
        drift_runs = sample(s, "driftgauge_check_runs_total", check=dash.CHECK, status="drift")
        assert sample(s, "driftgauge_exporter_leader") == 1
        assert (
            sample(s, "driftgauge_bucket_rows", check=dash.CHECK, day=yesterday, kind="missing")
            == 1
        )

        port = free_port()
        prometheus = start_scraping(tmp_path, f.ports[:1], port)
        stack.callback(stop, prometheus)
        prom = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)
        )
        exprs = expressions()
        await scraped(prom, prometheus, tmp_path, 1)
        base = await evaluate(prom, exprs)
        started = datetime.now(UTC)
        drifting = base["panel 'Buckets in drift' [A]"]
        assert drifting and all(v >= 1 for v in drifting.values() if v), drifting
        assert sum(1 for a in base.values() if a) >= 20, "too few expressions with data"

        for n in range(2, REPLICAS + 1):
            await f.start(n - 1)
            write_prometheus_config(tmp_path, f.ports[:n])
            prometheus.send_signal(signal.SIGHUP)
            await scraped(prom, prometheus, tmp_path, n)
            now = await evaluate(prom, exprs)
            elapsed = (datetime.now(UTC) - started).total_seconds()
            diff = differences(base, now, exprs, elapsed)
            assert not diff, f"with {n} replicas:\n" + "\n".join(diff)
            # One exporter among them, and every replica's own series.
            leader = 'driftgauge_exporter_leader{job="driftgauge"}'
            assert await instant_value(prom, leader) == [0.0] * (n - 1) + [1.0]
            assert (
                await instant_value(prom, "count by (instance) (driftgauge_build_info)")
                == [1.0] * n
            )
            # Without the election the replicas' stored series would add up.
            runs = 'sum(driftgauge_check_runs_total{job="driftgauge", status="drift"})'
            assert await instant_value(prom, runs) == [drift_runs]
            # Repair's series are stored ones too: one replica exports them.
            backfills = 'count(driftgauge_backfills{job="driftgauge", status="planned"})'
            assert await instant_value(prom, backfills) == [1.0]
