"""The console end to end in Debian's Chromium (headless, driven by Selenium through
Debian's chromedriver; nothing is downloaded), against a real `toolscout serve` on the
demo catalog.

Set ``TOOLSCOUT_CONSOLE_SCREENSHOTS=docs/console`` to refresh the README's screenshots
(1280×800, PNG) from this run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console_kit import only_for, platform_admin, privileged, tenant_admin, user
from demo_fixture import demo_db_copy, indexed_demo  # noqa: F401  (fixture)
from serve_fixture import auth, start_server, stop

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
MISSED = "status of purchase 94218"
WAIT_S = 60

pytestmark = pytest.mark.skipif(
    not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, indexed_demo: Path) -> Iterator[str]:  # noqa: F811
    where = tmp_path_factory.mktemp("console-browser")
    db = demo_db_copy(indexed_demo, where)
    proc, url = start_server("--db", str(db), "--audit", str(where / "audit.db"), "--dry-run")
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # chromedriver's profile and Chromium's singleton socket directory (which Chromium
    # leaves behind: an `org.chromium.Chromium.*` in /tmp for every run) in the test's temp
    temp = tmp_path_factory.mktemp("chromium-tmp")

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,800", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, env={**os.environ, "TMPDIR": str(temp)})
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S * 2)
    viewport(driver, 1280, 800)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("TOOLSCOUT_CONSOLE_SCREENSHOTS")
    return Path(where) if where else tmp_path_factory.mktemp("shots")


# -- helpers -------------------------------------------------------------------------
def viewport(driver: Any, width: int, height: int) -> None:
    """Size the window so that the page itself gets ``width`` × ``height`` pixels."""
    driver.set_window_size(width, height)
    dw, dh = driver.execute_script(
        "return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]"
    )
    driver.set_window_size(width + dw, height + dh)


def wait(driver: Any, css: str, text: str | None = None) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    located = (By.CSS_SELECTOR, css)
    cond = (
        ec.text_to_be_present_in_element(located, text)
        if text
        else ec.presence_of_element_located(located)
    )
    WebDriverWait(driver, WAIT_S).until(cond)
    return driver.find_element(By.CSS_SELECTOR, css)


def by(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def audit_rows_once(driver: Any, text: str) -> list[str]:
    """The audit table's rows once a row holding ``text`` is shown (a submitted filter
    loads a new page: rows read at once may be the old page's, or none); the rows as they
    are if none shows within WAIT_S."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def rows(d: Any) -> list[str]:
        try:
            return [tr.text for tr in by(d, "table.audit tbody tr")]
        except StaleElementReferenceException:  # the page changed while it was read
            return []

    with contextlib.suppress(TimeoutException):
        WebDriverWait(driver, WAIT_S).until(lambda d: any(text in r for r in rows(d)))
    return rows(driver)


def missed_row(driver: Any, url: str) -> Any:
    """The health page's row of the missed ``orders.find_order``, the page loaded again until
    it shows (up to WAIT_S): the server writes its discovery log from a background thread,
    so the two misses just answered may not be in it yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d: Any) -> Any:
        d.get(url)
        try:
            return next(
                (tr for tr in by(d, "tr") if MISSED in tr.text and "orders.find_order" in tr.text),
                None,
            )
        except StaleElementReferenceException:  # the page changed while it was read
            return None

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.5).until(found)


def no_csp_violation(driver: Any) -> None:
    problems = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems


def log_in(driver: Any, url: str, tok: str) -> None:
    from selenium.webdriver.common.keys import Keys

    driver.delete_all_cookies()
    driver.get(f"{url}/console/")
    wait(driver, "#token").send_keys(tok)
    by(driver, "form button[type=submit]")[0].click()
    wait(driver, "#query")
    assert driver.current_url.endswith("/console/playground")
    assert tok not in driver.current_url
    wait(driver, "#query").send_keys(Keys.HOME)


def ask(driver: Any, query: str, **picks: Any) -> None:
    """Type a request (and pick principals), submit with the keyboard, wait for results."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    for side in ("a", "b"):
        mode = picks.get(f"mode_{side}")
        if mode:
            Select(wait(driver, f"#mode_{side}")).select_by_value(mode)
        if mode == "roles":
            Select(wait(driver, f"#tenant_{side}")).select_by_visible_text(picks[f"tenant_{side}"])
            for box in by(driver, f"input[name=roles_{side}]"):
                if (box.get_attribute("value") in picks[f"roles_{side}"]) != box.is_selected():
                    box.click()
    box = wait(driver, "#query")
    box.clear()
    box.send_keys(query + Keys.ENTER)
    wait(driver, ".result")


def ids_in(element: Any) -> list[str]:
    return [e.text for e in element.find_elements("css selector", "code.tool")]


def shoot(driver: Any, shots: Path, name: str, at: str = "") -> None:
    from PIL import Image

    if at:
        driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", at)
    else:
        driver.execute_script("window.scrollTo(0, 0)")
    path = shots / f"{name}.png"
    driver.save_screenshot(str(path))
    with Image.open(path) as img:
        assert img.size == (1280, 800), img.size
        small = img.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def page_has_no_foreign_tool(driver: Any) -> None:
    html = driver.page_source
    assert not [t for t in only_for("globex") if t in html]


def miss(url: str, subject: str) -> None:
    """A caller needs orders.find_order after a discovery that did not show it."""
    tok = user(subject, "acme", "support_agent")
    shown = httpx.post(f"{url}/v1/discover", headers=auth(tok),
                       json={"query": MISSED, "k": 1}, timeout=60).json()  # fmt: skip
    assert "orders.find_order" not in [t["id"] for t in shown["tools"]], shown
    done = httpx.post(f"{url}/v1/execute", headers=auth(tok), timeout=60, json={
        "name": "orders.find_order", "arguments": {"order_id": "94218"},
        "discovery_id": shown["discovery_id"]})  # fmt: skip
    assert done.json()["status"] == "ok", done.text


# -- the journey (in order: each step leaves what the next one reads) -----------------
def test_a_support_agent_sees_find_order_first_and_no_admin_tool(server: str, browser: Any) -> None:
    log_in(browser, server, user("alice@acme", "acme", "support_agent"))
    ask(browser, "where is order 94218")
    result = wait(browser, ".result")
    shown = ids_in(by(browser, ".result table.shortlist")[0])
    assert shown[0] == "orders.find_order", shown
    assert not set(ids_in(result)) & privileged()
    assert "Hidden by policy" not in browser.page_source
    assert "why" in browser.page_source and "tokens instead of" in result.text
    page_has_no_foreign_tool(browser)
    browser.get(f"{server}/console/audit")
    assert "for administrators" in wait(browser, "main").text
    no_csp_violation(browser)


def test_an_administrator_sees_what_policy_hid(server: str, browser: Any, shots: Path) -> None:
    log_in(browser, server, platform_admin())
    ask(browser, "where is order 94218", mode_a="roles", tenant_a="acme", roles_a=["support_agent"],
        mode_b="roles", tenant_b="acme", roles_b=["billing_admin"])  # fmt: skip
    results = by(browser, ".result")
    assert len(results) == 2
    first = by(results[0], "table.shortlist")[0] if hasattr(results[0], "tag_name") else None
    assert first is None or ids_in(first)[0] == "orders.find_order"
    hidden = by(browser, ".hidden-tools li")
    assert hidden and any("missing_scope" in li.text for li in hidden), [li.text for li in hidden]
    assert "Hidden by policy" in results[0].text
    no_csp_violation(browser)
    shoot(browser, shots, "playground", at=".columns")


def test_an_accepted_alias_is_used_by_the_next_discovery(
    server: str, browser: Any, shots: Path
) -> None:
    for subject in ("ann@acme", "ben@acme"):
        miss(server, subject)
    row = missed_row(browser, f"{server}/console/health")
    shoot(browser, shots, "health")
    button = row.find_element("css selector", "button[type=submit]")
    button.click()
    assert "accepted" in wait(browser, "p.ok", "accepted").text
    no_csp_violation(browser)
    browser.get(f"{server}/console/playground")
    ask(browser, MISSED, mode_a="roles", tenant_a="acme", roles_a=["support_agent"])
    first = by(browser, ".result table.shortlist tbody tr")[0]
    assert ids_in(first) == ["orders.find_order"]
    assert "learned alias" in first.text


def test_the_audit_shows_the_call_and_the_change(server: str, browser: Any, shots: Path) -> None:
    browser.get(f"{server}/console/audit")
    assert "Intact" in wait(browser, ".chain").text
    shoot(browser, shots, "audit")
    field = wait(browser, "#tool")
    field.send_keys("orders.find_order")
    field.submit()
    rows = audit_rows_once(browser, "ann@acme")
    assert any("ann@acme" in r and "allowed" in r for r in rows), rows
    assert any("root@platform" in r and "admin:accept_alias" in r for r in rows), rows
    no_csp_violation(browser)


def test_the_catalog_lints_and_draws_overlap(server: str, browser: Any, shots: Path) -> None:
    browser.get(f"{server}/console/catalog")
    wait(browser, "table.cards")
    assert "page 1 of" in browser.page_source
    by(browser, "a[href$='overlap=1']")[0].click()
    wait(browser, "svg.plot")
    assert by(browser, "table.cards tbody tr")
    no_csp_violation(browser)
    shoot(browser, shots, "catalog")


def test_a_tenant_administrator_never_sees_another_tenants_tool(server: str, browser: Any) -> None:
    log_in(browser, server, tenant_admin())
    ask(browser, "sync our SAP orders", mode_a="roles", tenant_a="acme", roles_a=["support_lead"])
    page_has_no_foreign_tool(browser)
    for page in ("catalog", "catalog?overlap=1", "health", "audit"):
        browser.get(f"{server}/console/{page}")
        wait(browser, "main h1")
        page_has_no_foreign_tool(browser)


def test_narrow_window_and_keyboard(server: str, browser: Any) -> None:
    from selenium.webdriver.common.keys import Keys

    viewport(browser, 420, 800)
    try:
        for page in ("playground", "catalog", "health", "audit"):
            browser.get(f"{server}/console/{page}")
            wait(browser, "main h1")
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"
            )
            assert overflow <= 1, (page, overflow)
    finally:
        viewport(browser, 1280, 800)
    browser.get(f"{server}/console/playground")
    wait(browser, "main h1")
    browser.find_element("css selector", "body").send_keys(Keys.TAB)
    focused = browser.switch_to.active_element
    assert focused.get_attribute("class") == "skip"


def test_docs_render_offline(server: str, browser: Any) -> None:
    browser.get(f"{server}/docs")
    assert "toolscout" in wait(browser, ".swagger-ui .info .title", "toolscout").text
    no_csp_violation(browser)
