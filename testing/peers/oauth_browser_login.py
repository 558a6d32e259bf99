"""A person's step of an OAuth login, done in a real browser.

The Rust test `upstream_login::a_person_logs_in_on_the_authorization_servers_own_pages_in_a_real_browser`
runs this with the `.venv` Python: Debian's chromium, driven through
chromium-driver by selenium, opens the authorization URL `code-mode login`
printed, signs in on the authorization server's own page (oidc-provider's
development login page: any name, any password), consents on its consent
page, and is redirected to code-mode's loopback port, whose page it reads.

    python oauth_browser_login.py --url AUTHORIZATION_URL --name NAME

Prints one JSON object on stdout: the titles of the pages seen in order,
the scheme, host and path of the last one (never its query, which holds
the code) and that page's text.
"""

import argparse
import json
import sys
import time
from urllib.parse import urlsplit

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser():
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=900,700"]:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait_for(what, check, seconds=20.0):
    give_up = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > give_up:
            raise TimeoutError(f"waited {seconds} s for {what}")
        time.sleep(0.1)


def element(driver, css):
    try:
        return driver.find_element(By.CSS_SELECTOR, css)
    except NoSuchElementException:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    driver = browser()
    seen = []
    try:
        driver.get(args.url)
        # The authorization server's own sign-in page.
        login = wait_for("the sign-in page", lambda: element(driver, "input[name=login]"))
        seen.append(driver.title)
        login.send_keys(args.name)
        driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys("any password")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # Its consent page: the client and what it asks for, and Continue.
        consent = wait_for(
            "the consent page", lambda: element(driver, "form input[name=prompt][value=consent]")
        )
        seen.append(driver.title)
        consent.find_element(By.XPATH, "./ancestor::form//button[@type='submit']").click()
        # Redirected to code-mode's loopback listener, which says so.
        wait_for("the loopback page", lambda: urlsplit(driver.current_url).hostname == "127.0.0.1"
                 and urlsplit(driver.current_url).path == "/callback" and driver.title)
        seen.append(driver.title)
        last = urlsplit(driver.current_url)
        body = driver.find_element(By.TAG_NAME, "body").text
        print(json.dumps({"titles": seen, "last": f"{last.scheme}://{last.netloc}{last.path}", "text": body}))
        return 0
    except Exception as exc:  # the test shows why
        last = urlsplit(driver.current_url)
        print(json.dumps({"titles": seen, "last": f"{last.scheme}://{last.netloc}{last.path}", "error": repr(exc),
                          "text": driver.find_element(By.TAG_NAME, "body").text[:2000]}))
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
