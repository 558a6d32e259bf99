"""Prometheus's own graph page in a real browser, with nothing off the machine.

The Rust test `metrics::the_stacks_prometheus_draws_the_offline_dashboard_in_chromium_from_its_own_files_alone`
runs this with the `.venv` Python: Debian's chromium, driven through
chromium-driver by selenium, opens a page of the Prometheus of the compose
stack's image (the dashboard link docs/metrics.md gives) and waits until
every panel has drawn a graph (opening it again every 10 s until then). Every address but loopback goes to a proxy
that does not exist, and no name resolves, so a page that needed a CDN or
the internet would miss a file (which the browser's log and the list of
resources show).

    python prometheus_graph.py --url URL [--screenshot PNG]

Prints one JSON object on stdout: the panels' expressions, how many lines
each drew and its legend, the resources the page loaded, the browser's
errors, the page's title.
"""

import argparse
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser():
    options = webdriver.ChromeOptions()
    for arg in [
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1100,1400",
        # Loopback only: anything else goes to a proxy nobody listens on,
        # and no name resolves.
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def panels(driver):
    """Each panel: its expression, the lines its graph drew, its legend."""
    seen = []
    for panel in driver.find_elements(By.CSS_SELECTOR, "#graph_container form.query_form"):
        expr = panel.find_element(By.CSS_SELECTOR, "textarea.expression_input").get_attribute("value")
        lines = panel.find_elements(By.CSS_SELECTOR, ".graph svg path.path")
        legend = [e.text for e in panel.find_elements(By.CSS_SELECTOR, ".legend .line")]
        errors = [e.text for e in panel.find_elements(By.CSS_SELECTOR, ".alert-danger") if e.text.strip()]
        seen.append({"expr": expr, "lines": len(lines), "legend": legend, "errors": errors})
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshot")
    parser.add_argument("--panels", type=int, required=True, help="how many panels the page has")
    args = parser.parse_args()

    driver = browser()
    try:
        # A series scraped for the first time a moment ago has no point yet
        # on the graph's grid of steps (15 minutes: one each 3.6 s):
        # open the page again, as a person would, until every panel draws.
        deadline = time.monotonic() + 120
        seen = []
        drawn = False
        while not drawn and time.monotonic() < deadline:
            driver.get(args.url)
            page_deadline = time.monotonic() + 10
            while time.monotonic() < page_deadline:
                seen = panels(driver)
                drawn = len(seen) == args.panels and all(p["lines"] > 0 and p["legend"] for p in seen)
                if drawn:
                    break
                time.sleep(0.5)
        # Rickshaw draws in steps: let the last one settle before the picture.
        time.sleep(1)
        seen = panels(driver)
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        log = [
            {"level": e["level"], "message": e["message"]}
            for e in driver.get_log("browser")
            if e["level"] in ("SEVERE", "WARNING")
        ]
        if args.screenshot:
            driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
            time.sleep(0.3)
            driver.save_screenshot(args.screenshot)
        print(json.dumps({
            "title": driver.title,
            "url": driver.current_url,
            "panels": seen,
            "page": driver.current_url,
            "resources": resources,
            "log": log,
        }))
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
