"""The Lakehouse view in a real browser (Debian's chromium, headless, driven by Playwright):
log in to the running Airflow, open the Lakehouse entry, find the table and its timeline,
trigger a service, save a screenshot."""

from __future__ import annotations

import os
import shutil

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]
CHROMIUM = os.environ.get("LAKEHOUSE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright drives the browser (pip install '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium, or set LAKEHOUSE_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_log_in_find_the_table_and_trigger_a_service(platform, browser, tmp_path):
    layout, started, _ = platform
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    # Logged out, Airflow sends the browser to its login form; sign in as a user would.
    page.goto(f"{layout.url}/plugin/lakehouse")
    page.wait_for_url("**/auth/login**")
    page.fill("input[name=username]", started["user"])
    page.fill("input[name=password]", started["password"])
    page.get_by_role("button", name="Sign in").click()
    # Signed in once the UI has left the login page and settled (going elsewhere while it still
    # navigates would abort that navigation).
    page.wait_for_url(lambda url: url.startswith(layout.url) and "/auth/" not in url)
    page.wait_for_load_state("networkidle")
    # The "Lakehouse" entry sits in the navigation (under Browse) and opens the embedded view.
    page.goto(f"{layout.url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lakehouse").click()
    page.wait_for_url("**/plugin/lakehouse")
    view = page.frame_locator("iframe")
    row = view.locator('tr[data-table="trips"]')
    row.wait_for()
    assert "MERGE_ON_READ" in row.inner_text()
    view.get_by_role("link", name="trips").click()
    view.locator("#timeline").wait_for()
    rows = view.locator("#timeline tbody tr")
    assert rows.count() >= 4  # two ingests, the compaction, the clean
    assert view.locator("svg.lh-timeline g[data-instant]").count() == rows.count()
    assert "trips_ingest.ingest" in view.locator("#timeline").inner_text()
    view.get_by_role("button", name="Run clean").click()
    message = view.locator("#message", has_text="triggered trips_clean")
    message.wait_for()
    run_id = message.inner_text().split(": ", 1)[1]
    shot = tmp_path / "lakehouse-view.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("LAKEHOUSE_SCREENSHOTS"):
        os.makedirs(os.environ["LAKEHOUSE_SCREENSHOTS"], exist_ok=True)
        shutil.copy(shot, os.environ["LAKEHOUSE_SCREENSHOTS"])
    # The click made a real DAG run.
    from lakehouse.airflow import platform as plat
    assert plat.Api(layout).get(f"/dags/trips_clean/dagRuns/{run_id}")["dag_id"] == "trips_clean"
