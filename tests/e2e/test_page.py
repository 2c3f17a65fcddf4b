"""The drill-down page in a real headless Chromium against a live `driftgauge serve`.

PostgreSQL holds the source, OpenSearch the reader with drift planted per day (2 missing,
1 mismatched, 1 extra document; see test_serve.plant). A second check reads an index that
does not exist, so its runs fail. The browser is Debian's `chromium` (`make tools`), driven
by Playwright over its own pipe; nothing is downloaded. Screenshots go to pytest's tmp dir
and are checked by pixel: the planted days' squares are red where the grid draws them.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from playwright.async_api import async_playwright

from tests.e2e.support import (
    OS_URL,
    dump_log,
    past_days,
    scratch_database,
    scratch_index,
    serve_config,
    serving,
    task_check,
    until,
    write_config,
)
from tests.e2e.test_serve import load_planted, make_rows

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium")

TOKEN = "page-" + uuid.uuid4().hex
DAYS = 3
RED = (0xD3, 0x2F, 0x2F)  # --drift in page.css
GREY = (0xD9, 0xD9, 0xD9)  # --none: a day no run judged
CONFIG = serve_config(
    "driftgauge_page",
    task_check("reviews", "drilldown: {leaf_rows: 20}", "schedule: {recent: {every: 1h, days: 4}}")
    + task_check(
        "broken",
        "description: reads an index that is not there",
        "schedule: {recent: {every: 1h, days: 4}}",
        index="<INDEX>_gone",
    ),
)


@dataclass
class Served:
    """One replica that has judged both checks once."""

    url: str
    log: Path
    days: list[date]
    planted: dict[str, dict[str, set[str]]]


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    tmp = tmp_path_factory.mktemp("page")
    days = past_days(DAYS)
    rows = make_rows(days)
    log = tmp / "serve.log"
    async with scratch_database("dg_page") as dsn, scratch_index("dg_page") as (client, index):
        planted = await load_planted(client, index, dsn, rows)
        config = write_config(tmp, CONFIG, DSN=dsn, OS=OS_URL, TOKEN=TOKEN, INDEX=index)
        async with serving(config, log) as replica:
            async with httpx.AsyncClient(base_url=replica.url, timeout=10) as http:
                # Hourly schedules: the one run of each check is this one, so the stored
                # results stay put while the browser walks them.
                for check in ("reviews", "broken"):
                    started = await http.post(
                        f"/api/v1/checks/{check}/runs", headers={"Authorization": f"Bearer {TOKEN}"}
                    )
                    assert started.status_code in (202, 409), started.text

                async def judged() -> bool:
                    checks = (await http.get("/api/v1/checks")).json()["checks"]
                    return all(c["status"] is not None for c in checks)

                await until("a first run of both checks", judged, limit=30)
            yield Served(replica.url, log, days, planted)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    assert CHROMIUM is not None, "no chromium on PATH: `make tools` installs Debian's"
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            await chromium.close()


class Walk:
    """A page on the served app that records every request the browser makes."""

    def __init__(self, page: Any, served: Served) -> None:
        self.page = page
        self.served = served
        self.requests: list[str] = []
        page.on("request", lambda req: self.requests.append(req.url))
        page.set_default_timeout(10_000)

    async def drawn(self) -> int:
        got = await self.page.get_attribute("#view", "data-drawn")
        return int(got or 0)

    async def wait_drawn(self, after: int) -> None:
        """Wait until the view was drawn again since `after` (a navigation finished)."""
        await self.page.wait_for_function(
            "n => Number(document.getElementById('view').dataset.drawn || 0) > n", arg=after
        )

    async def click(self, selector: str) -> None:
        before = await self.drawn()
        await self.page.locator(selector).first.click()
        await self.wait_drawn(before)

    async def back(self) -> None:
        before = await self.drawn()
        await self.page.go_back()
        await self.wait_drawn(before)

    async def hrefs(self, selector: str) -> list[str]:
        return [
            h
            for h in await self.page.eval_on_selector_all(
                selector, "els => els.map(e => e.getAttribute('href'))"
            )
            if h
        ]

    async def error(self) -> str:
        if await self.page.locator("#error").is_hidden():
            return ""
        return str(await self.page.inner_text("#error"))

    async def shot(self, path: Path) -> Image.Image:
        await self.page.screenshot(path=str(path), full_page=True)
        return Image.open(path).convert("RGB")


def near(pixel: tuple[int, ...], colour: tuple[int, int, int], slack: int = 12) -> bool:
    return all(abs(a - b) <= slack for a, b in zip(pixel, colour, strict=False))


async def cell_pixel(walk: Walk, image: Image.Image, check: str, day: str) -> tuple[int, ...]:
    """Return the screenshot's colour inside the grid square of `check`'s `day`."""
    box = await walk.page.locator(
        f'section[data-check="{check}"] .cell[data-day="{day}"]'
    ).bounding_box()
    assert box is not None, f"no square for {check} {day}"
    # A corner of the square, inset past its rounded edge and clear of the day number.
    pixel = image.getpixel((int(box["x"]) + 5, int(box["y"]) + 5))
    assert isinstance(pixel, tuple)
    return pixel


def assert_not_blank(image: Image.Image) -> None:
    colours = image.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20, "the screenshot is (nearly) one colour"


async def test_page_walks_day_hour_prefix_to_the_planted_keys(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    page = await browser.new_page(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
    walk = Walk(page, served)
    try:
        await page.goto(served.url + "/")
        await page.wait_for_selector('section[data-check="reviews"] .grid .cell')
        await page.wait_for_function("document.getElementById('view').dataset.drawn")

        # The checks with their status: drift and error as such, never ok.
        reviews = page.locator('section[data-check="reviews"] h2 .badge').first
        broken = page.locator('section[data-check="broken"]')
        assert await reviews.inner_text() == "drift"
        assert await broken.locator("h2 .badge").first.inner_text() == "error"
        assert "index" in (await broken.locator(".reason").first.inner_text()).lower()

        home = await walk.shot(tmp_path / "1-checks.png")
        assert_not_blank(home)
        for planted_day in served.days:
            pixel = await cell_pixel(walk, home, "reviews", planted_day.isoformat())
            assert near(pixel, RED), f"{planted_day}: {pixel} is not the drift red"
        unjudged = datetime.now(UTC).date() - timedelta(days=DAYS + 5)
        assert near(await cell_pixel(walk, home, "reviews", unjudged.isoformat()), GREY)
        statuses = await page.eval_on_selector_all(
            'section[data-check="reviews"] .cell', "els => els.map(e => e.dataset.status)"
        )
        assert statuses.count("drift") == DAYS and "ok" not in statuses

        day = served.days[1].isoformat()
        truth = served.planted[day]
        # Keys need the token: without one the page says so instead of showing nothing.
        before = await walk.drawn()
        await page.goto(f"{served.url}/#/checks/reviews/days/{day}/keys")
        await walk.wait_drawn(before)
        assert "401" in await walk.error()
        before = await walk.drawn()
        await page.fill("#token", TOKEN)
        await page.click("#token-use")
        await walk.wait_drawn(before)
        assert await walk.error() == ""
        assert TOKEN not in page.url and await page.input_value("#token") == ""
        before = await walk.drawn()
        await page.goto(f"{served.url}/#/")
        await walk.wait_drawn(before)

        # day -> hour -> prefix -> keys, by clicking.
        await walk.click(f'section[data-check="reviews"] a[href="#/checks/reviews/days/{day}"]')
        assert "missing 2" in await page.inner_text(".bucket")
        if not await walk.hrefs("table.nodes tr.differs a"):
            # The run peeled the day from its digests and kept no hours: ask for them live.
            assert "Compute the hours now" in await page.inner_text("#view")
            await walk.click(f'a[href="#/checks/reviews/days/{day}?live"]')
            assert await walk.error() == ""
        day_view = await page.get_attribute("#view", "data-shown")
        await walk.shot(tmp_path / "2-day.png")
        hours = await walk.hrefs("table.nodes tr.differs a")
        assert hours, "no differing hour on a day with planted drift"
        found: dict[str, set[str]] = {"missing": set(), "extra": set(), "mismatched": set()}
        keys_shot = tmp_path / "4-keys.png"
        for hour in hours:
            await walk.click(f'a[href="{hour}"]')
            prefixes = await walk.hrefs("table.nodes tr.differs a")
            if not prefixes:
                # The stored run compared this hour whole: split it live (needs the token).
                await walk.click('a[href$="?live"]')
                prefixes = await walk.hrefs("table.nodes tr.differs a")
            assert prefixes, f"{hour}: no differing prefix"
            for prefix in prefixes:
                await walk.click(f'a[href="{prefix}"]')
                await page.wait_for_selector(".keys-part")
                rows = await page.eval_on_selector_all(
                    "table.keys tbody tr",
                    "rs => rs.map(r => [r.cells[0].innerText, r.cells[1].innerText])",
                )
                for key, kind in rows:
                    found[kind].add(key)
                if not keys_shot.exists():
                    assert_not_blank(await walk.shot(keys_shot))
                await walk.back()
            await walk.shot(tmp_path / "3-hour.png")
            while (await page.get_attribute("#view", "data-shown")) != day_view:
                await walk.back()
        assert found == truth, (found, truth)
        assert keys_shot.exists()
        assert await walk.error() == ""
    finally:
        await page.close()
    # Everything came from the server itself: no CDN, and the token never in a URL.
    assert walk.requests and all(u.startswith(served.url + "/") for u in walk.requests), sorted(
        {u for u in walk.requests if not u.startswith(served.url)}
    )
    assert not [u for u in walk.requests if TOKEN in u]
    assert "Traceback" not in dump_log(served.log, 400)


async def test_docs_render_offline_from_local_assets(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    walk = Walk(page, served)
    try:
        await page.goto(served.url + "/docs")
        await page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
        summaries = await page.locator(".opblock-summary-path").all_inner_texts()
        assert len(summaries) >= 20 and "/api/v1/checks/{check}/days" in [
            s.replace("\u200b", "") for s in summaries
        ]
        assert await page.locator(".btn.authorize").count() == 1  # the bearer scheme
        assert_not_blank(await walk.shot(tmp_path / "docs.png"))
    finally:
        await page.close()
    assert all(u.startswith(served.url + "/") for u in walk.requests), walk.requests


async def test_page_shows_the_apis_counts_trend_and_last_error(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
        checks = {c["name"]: c for c in (await http.get("/api/v1/checks")).json()["checks"]}
        since = (datetime.now(UTC).date() - timedelta(days=27)).isoformat()
        days = (await http.get("/api/v1/checks/reviews/days", params={"since": since})).json()
    buckets = {b["day"]: b for b in days["days"]}
    error = checks["broken"]["last_run"]["error"]
    assert error, "the broken check's run did not fail"
    assert checks["reviews"]["last_run"]["error"] is None
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        await page.goto(served.url + "/")
        await page.wait_for_selector('section[data-check="broken"] .grid .cell')
        await page.wait_for_selector('section[data-check="reviews"] svg.trend')
        await page.screenshot(path=str(tmp_path / "counts.png"), full_page=True)

        # A drifted day's square shows the API's numbers, and says them on hover.
        day = served.days[1].isoformat()
        bucket = buckets[day]
        assert bucket["missing"] == 2 and bucket["extra"] == 1 and bucket["mismatched"] == 1
        cell = page.locator(f'section[data-check="reviews"] .cell[data-day="{day}"]')
        shown = await cell.locator(".n").evaluate_all(
            "ns => ns.map(n => [n.dataset.kind, n.dataset.count, n.innerText])"
        )
        kinds = ["missing", "extra", "mismatched"] + (
            ["duplicates"] if bucket["duplicates"] else []
        )
        assert [k for k, _, _ in shown] == kinds, shown
        for kind, count, text in shown:
            assert int(count) == bucket[kind], (kind, count, bucket)
            assert int(text.lstrip("\u2212+\u2260\u00d7")) == bucket[kind], (kind, text)
        title = await cell.get_attribute("title") or ""
        for kind in ("missing", "extra", "mismatched", "duplicates"):
            assert f"{kind} {bucket[kind]}" in title, title

        # The trend: one point per day the API returned, higher where more keys differ.
        chart = page.locator('svg.trend[data-check="reviews"]')
        assert await chart.get_attribute("role") == "img"
        points = await chart.locator("circle.point").evaluate_all(
            "ps => ps.map(p => [p.dataset.day, Number(p.dataset.value), p.cy.baseVal.value])"
        )
        assert sorted(d for d, _, _ in points) == sorted(buckets), (points, sorted(buckets))
        for d, value, _ in points:
            b = buckets[d]
            assert value == b["missing"] + b["extra"] + b["mismatched"], (d, value)
        for _, v1, y1 in points:
            for _, v2, y2 in points:
                assert (v1 > v2) == (y1 < y2), points
        assert "differing" in (await chart.locator("desc").text_content() or "")

        # The failed check shows its run's error; the healthy one shows none.
        box = page.locator('section[data-check="broken"] .last-error')
        assert await box.locator(".error-text").inner_text() == error
        assert await page.locator('section[data-check="reviews"] .last-error').count() == 0
    finally:
        await page.close()
