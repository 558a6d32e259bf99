"""Sign in to the web console through its OAuth issuer, in a real browser.

The Rust test `console_oauth` runs this with the `.venv` Python: Debian's
chromium, driven through chromium-driver by selenium, opens the console's
login page, follows "Sign in with ...", signs in and consents on the
issuer's own pages (oidc-provider's development login), and comes back to
the console. The console and the issuer are on two sites (the console at
`localhost`, the issuer at `127.0.0.1`), so the cookies' SameSite
attributes are the browser's to enforce, as they would be in use.

    python oauth_sign_in.py --console http://localhost:PORT --issuer http://127.0.0.1:PORT2 --login alice

Prints one JSON object on stdout with what the browser saw:

- `offered`: the text of the sign-in link on the login page;
- `at_issuer`: the URL (without its query) the link led to;
- `landed`: the URL the browser rested on after the issuer sent it back,
  `who` the name the console shows there (or null), `operations_link`
  whether the board links the operators' view, `page` the text shown;
- `cookies`: the console's cookies the browser keeps (name, path,
  sameSite, httpOnly), `operations_title` the title of
  `/console/operations` opened next;
- `from_the_issuer`: where a navigation to `/console` started by a page of
  the issuer ends (the login page, when the browser takes the issuer for
  another site and keeps the SameSite=Strict session cookie to itself);
  `from_the_console` the same navigation started by a console page, and
  `who_then` the name shown there.
"""

import argparse
import json
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser():
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,760"]:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait_until(check, seconds):
    """True once `check()` holds, False after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def text_of(driver, selector):
    try:
        return driver.find_element(By.CSS_SELECTOR, selector).text
    except NoSuchElementException:
        return None


def path_of(url):
    return url.split("?", 1)[0]


def navigate_from_page(driver, url):
    """A navigation the current page starts (as a link would), not one
    typed in the address bar: the browser judges its site against that
    page's."""
    driver.execute_script("window.location.href = arguments[0];", url)


def sign_in(driver, console, issuer, login):
    seen = {}
    driver.get(f"{console}/console/login")
    link = driver.find_element(By.CSS_SELECTOR, "a[href='/console/login/oauth']")
    seen["offered"] = link.text
    link.click()
    if not wait_until(lambda: driver.find_elements(By.NAME, "login"), 20):
        raise RuntimeError(f"no login form at the issuer: {driver.current_url}\n{driver.page_source[:2000]}")
    seen["at_issuer"] = path_of(driver.current_url)
    driver.find_element(By.NAME, "login").send_keys(login)
    driver.find_element(By.NAME, "password").send_keys("anything")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    consent = "form input[name=prompt][value=consent]"
    if not wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, consent), 20):
        raise RuntimeError(f"no consent form at the issuer: {driver.current_url}\n{driver.page_source[:2000]}")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # Back at the console: its callback answers with a page that sends the
    # browser on to the board. Wait for the board; whatever the browser
    # rests on after 20 s is reported.
    wait_until(lambda: path_of(driver.current_url).rstrip("/") == f"{console}/console" and text_of(driver, ".who"), 20)
    seen["landed"] = driver.current_url
    seen["who"] = text_of(driver, ".who")
    seen["operations_link"] = bool(driver.find_elements(By.CSS_SELECTOR, "a[href='/console/operations']"))
    seen["page"] = driver.find_element(By.TAG_NAME, "body").text[:2000]
    return seen


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--console", required=True, help="the console's base URL, e.g. http://localhost:8080")
    parser.add_argument("--issuer", required=True, help="the issuer's URL, e.g. http://127.0.0.1:9000")
    parser.add_argument("--login", required=True, help="the name to sign in with at the issuer")
    args = parser.parse_args(argv)
    console, issuer = args.console.rstrip("/"), args.issuer.rstrip("/")
    driver = browser()
    try:
        seen = sign_in(driver, console, issuer, args.login)
        seen["cookies"] = [
            {"name": c["name"], "path": c.get("path"), "sameSite": c.get("sameSite"), "httpOnly": c.get("httpOnly")}
            for c in driver.get_cookies()
        ]
        driver.get(f"{console}/console/operations")
        seen["operations_title"] = driver.title
        # The board, reached from a page of the issuer's site.
        driver.get(f"{issuer}/.well-known/openid-configuration")
        navigate_from_page(driver, f"{console}/console")
        wait_until(lambda: driver.current_url.startswith(console), 20)
        wait_until(lambda: driver.execute_script("return document.readyState") == "complete", 20)
        seen["from_the_issuer"] = path_of(driver.current_url)
        # The same navigation, started by a console page.
        driver.get(f"{console}/console/operations")
        navigate_from_page(driver, f"{console}/console")
        wait_until(lambda: path_of(driver.current_url).rstrip("/") == f"{console}/console" and text_of(driver, ".who"), 20)
        seen["from_the_console"] = path_of(driver.current_url)
        seen["who_then"] = text_of(driver, ".who")
    finally:
        driver.quit()
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
