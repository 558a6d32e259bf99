"""A person connecting their own account at a wrapped server, in a real browser.

The Rust test `accounts_browser` runs this (through `mcp_client.py
--url-browser`) when code-mode asks its MCP client, by a URL-mode
elicitation, to open a connect link: Debian's chromium, driven through
chromium-driver by selenium, opens the link; the console is not logged in
yet, so it shows its login page, where the person pastes their code-mode
token; the console sends the browser back to the link, which sends it on
to the upstream's authorization server; there the person signs in on its
own page (oidc-provider's development login page: the name typed is the
account's `sub`), consents, and lands on the console's callback page.

    python connect_browser.py --token CODE_MODE_TOKEN --name UPSTREAM_NAME [--via BASE] LINK

--via BASE opens the link at another frontend replica (BASE: its
scheme://host:port) than the one that asked, as a load balancer may.

Prints one JSON object on stdout: the titles of the pages seen in order,
the scheme, host and path of each page's URL (never a query, which may
hold a code), and the last page's text.
"""

import argparse
import json
import sys
from urllib.parse import urlsplit

from selenium.webdriver.common.by import By

from oauth_browser_login import browser, element, wait_for


def where(driver):
    url = urlsplit(driver.current_url)
    return f"{url.scheme}://{url.netloc}{url.path}"


def watched(driver, history, css):
    """The element `css` names, if on the page; each place passed noted in
    `history` (shown when a step fails)."""
    here = where(driver)
    if not history or history[-1] != here:
        history.append(here)
    return element(driver, css)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--token", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--via")
    parser.add_argument("link")
    args = parser.parse_args()
    if args.via:
        link = urlsplit(args.link)
        args.link = args.via.rstrip("/") + link.path
    driver = browser()
    seen, paths, history = [], [], []
    try:
        driver.get(args.link)
        # The console's login page (the link came back to it with ?next=).
        token = wait_for("the console's login page", lambda: element(driver, "input[name=token]"))
        seen.append(driver.title)
        paths.append(where(driver))
        token.send_keys(args.token)
        driver.find_element(By.CSS_SELECTOR, "form[action='/console/login'] button[type=submit]").click()
        # Back to the link, then on to the authorization server's sign-in.
        login = wait_for("the authorization server's sign-in page", lambda: watched(driver, history, "input[name=login]"))
        seen.append(driver.title)
        paths.append(where(driver))
        login.send_keys(args.name)
        driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys("any password")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        consent = wait_for("the consent page", lambda: element(driver, "form input[name=prompt][value=consent]"))
        seen.append(driver.title)
        paths.append(where(driver))
        consent.find_element(By.XPATH, "./ancestor::form//button[@type='submit']").click()
        # The console's callback page says what was connected.
        wait_for("the callback page", lambda: urlsplit(driver.current_url).path == "/console/connect/callback"
                 and element(driver, "main"))
        seen.append(driver.title)
        paths.append(where(driver))
        body = driver.find_element(By.TAG_NAME, "main").text
        print(json.dumps({"titles": seen, "paths": paths, "text": body}))
        return 0
    except Exception as exc:  # the test shows why
        print(json.dumps({"titles": seen, "paths": paths + [where(driver)], "error": repr(exc), "history": history,
                          "text": driver.find_element(By.TAG_NAME, "body").text[:2000]}))
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
