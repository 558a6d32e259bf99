"""The web console in a real browser, with a real MCP client's code waiting.

The Rust test `console_browser` runs this with the `.venv` Python: the
official MCP SDK (`mcp.Client` at its defaults, or `ClientSession` with the
initialize handshake) runs code that calls a tool whose rule names
approvers, while Debian's chromium, driven through chromium-driver by
selenium, logs in to the console as an approver and decides.

    python browser.py --url URL --caller-token T --approver-token A
                      [--api client|session] [--screenshot PNG]

Two cells run, one after the other:
1. `echo` of a plain text; the approver sees the waiting call (the
   screenshot is taken then, with exactly one call waiting) and approves
   it with a note; the cell prints the tool's result.
2. `echo` of hostile text (markup that would run script if the page did
   not escape it, and a long string); the approver checks the page ran
   nothing and shows the text as text, then declines with a note; the
   code's ToolError carries the note.

Prints one JSON object on stdout with what was seen.
"""

import argparse
import asyncio
import json
import sys
import time

import httpx2
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

HOSTILE = '<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2">'

def approved_cell(tool):
    return f"print(await {tool}({{'text': 'approved-in-the-browser'}}))"


def hostile_cell(tool):
    return f"""
try:
    print(await {tool}({{'text': {HOSTILE!r} + 'A' * 15000}}))
except ToolError as e:
    print('refused:', e)
"""


def browser():
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,760"]:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def log_in(driver, base, token):
    driver.get(f"{base}/console/login")
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form[action='/console/login'] button[type=submit]").click()
    wait_until(lambda: driver.current_url.rstrip("/").endswith("/console"), 20, "the board after logging in")


def wait_until(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} within {seconds} s")


def waiting_calls(driver, base):
    driver.get(f"{base}/console")
    return driver.find_elements(By.CSS_SELECTOR, "section.call")


def first_call(driver, base):
    found = []

    def there():
        found[:] = waiting_calls(driver, base)
        return bool(found)

    wait_until(there, 60, "a waiting call on the board")
    return found


def decide(driver, base, button, note):
    """Decide the first waiting call (the board refreshes itself every few
    seconds: an element from before a refresh is found again)."""
    for _ in range(5):
        try:
            call = first_call(driver, base)[0]
            call.find_element(By.NAME, "note").send_keys(note)
            call.find_element(By.CSS_SELECTOR, f"button.{button}").click()
            return
        except StaleElementReferenceException:
            continue
    raise RuntimeError("the board kept refreshing under the decision")


def look_at_first(driver, base):
    """What the first waiting call shows, read right after loading."""
    for _ in range(5):
        try:
            calls = first_call(driver, base)
            call = calls[0]
            return {
                "count": len(calls),
                "text": call.text,
                "images": len(call.find_elements(By.TAG_NAME, "img")),
                "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
                "pwned": driver.execute_script("return window.__pwned === undefined ? null : window.__pwned"),
            }
        except StaleElementReferenceException:
            continue
    raise RuntimeError("the board kept refreshing")


def stdout_of(result):
    text = "".join(getattr(block, "text", "") for block in result.content)
    try:
        report = json.loads(text)
    except ValueError:
        return f"(not a report: {text})"
    return report.get("stdout", "") + (f"(error: {report['error']})" if report.get("error") else "")


async def run_cell(client, code):
    result = await client.call_tool("run_python", {"code": code})
    return stdout_of(result)


async def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--caller-token", required=True)
    parser.add_argument("--approver-token", required=True)
    parser.add_argument("--api", choices=["client", "session"], default="client")
    parser.add_argument("--screenshot")
    parser.add_argument("--tool", default="echo", help="the tool as code calls it")
    args = parser.parse_args(argv)
    base = args.url.removesuffix("/mcp")
    seen = {"api": args.api}
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {args.caller_token}"}, timeout=httpx2.Timeout(300.0)
    )
    server = streamable_http_client(args.url, http_client=http)
    driver = await asyncio.to_thread(browser)
    try:
        await asyncio.to_thread(log_in, driver, base, args.approver_token)
        if args.api == "client":
            async with Client(server) as client:
                await cells(client, driver, base, args, seen)
        else:
            async with server as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    await cells(session, driver, base, args, seen)
    finally:
        await asyncio.to_thread(driver.quit)
    print(json.dumps(seen))


async def cells(client, driver, base, args, seen):
    # 1. Approved, with the screenshot of one waiting call.
    running = asyncio.create_task(run_cell(client, approved_cell(args.tool)))
    first = await asyncio.to_thread(look_at_first, driver, base)
    seen["waiting_then"] = first["count"]
    seen["waiting_text"] = first["text"]
    if args.screenshot:
        await asyncio.to_thread(driver.save_screenshot, args.screenshot)
    await asyncio.to_thread(decide, driver, base, "approve", "fine by me")
    seen["approved"] = await asyncio.wait_for(running, 120)

    # 2. Hostile arguments, declined with a note.
    running = asyncio.create_task(run_cell(client, hostile_cell(args.tool)))
    hostile = await asyncio.to_thread(look_at_first, driver, base)
    # The summary shows each value as compact JSON: the markup, as text.
    seen["hostile_shown_as_text"] = all(
        part in hostile["text"] for part in ["<script>window.__pwned=1</script>", "<img src=x onerror="]
    )
    seen["pwned"] = hostile["pwned"]
    seen["images_in_call"] = hostile["images"]
    seen["scripts_on_page"] = hostile["scripts"]
    await asyncio.to_thread(decide, driver, base, "decline", "not on a Friday")
    seen["declined"] = await asyncio.wait_for(running, 120)
    # The decision shows among the recent ones.
    driver.get(f"{base}/console")
    seen["recent_text"] = driver.find_element(By.TAG_NAME, "table").text


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
