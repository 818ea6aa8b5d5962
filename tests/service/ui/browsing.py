"""What the browser tests do on every page: load it, check the console, keep a screenshot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as loaded
from selenium.webdriver.support.wait import WebDriverWait

MAX_SHOT_HEIGHT = 2000
WAIT_S = 15


def console_problems(driver: Any) -> list[str]:
    """Console entries at warning level or above since the last call (the log drains)."""
    return [
        f"{e['level']}: {e['message']}"
        for e in driver.get_log("browser")
        if e["level"] in {"SEVERE", "WARNING"}
    ]


def visit(driver: Any, url: str, shots: Path, name: str, at: str | None = None) -> None:
    """Load ``url``, check the console stayed clean, save a full-page screenshot (with
    ``at``, a CSS selector: a window's height from that element on, for long pages)."""
    driver.get(url)
    problems = console_problems(driver)
    assert problems == [], f"{url}: {problems}"
    if at is None:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1440, min(max(900, int(height)), MAX_SHOT_HEIGHT))
    else:
        driver.set_window_size(1440, 1200)
        driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", at)
    driver.save_screenshot(str(shots / f"ui-{name}.png"))
    driver.set_window_size(1440, 900)


def sign_in(driver: Any, url: str, token: str) -> None:
    """Open ``url`` (a dashboard page), be sent to the login form, sign in with ``token``
    and come back; the in-place refresh switched off (it would swap pages under a test)."""
    driver.get(url)
    assert "/ui/login" in driver.current_url  # never open without a token
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(driver, WAIT_S).until(loaded.url_matches(re.escape(urlsplit(url).path) + "$"))
    assert console_problems(driver) == []
    # The session cookie is out of the page's reach.
    assert "cpsched_session" not in driver.execute_script("return document.cookie")
    driver.execute_script("window.localStorage.setItem('cpsched.autorefresh', '0')")


def texts(driver: Any, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
