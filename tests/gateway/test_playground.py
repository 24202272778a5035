"""The playground in a real browser: Playwright driving Debian's Chromium against a real server with SmolLM2.
A typed message streams its reply in several chunks; schema mode returns JSON that parses and fits."""
from __future__ import annotations

import json
import os

import httpx
import jsonschema
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.conftest import start_server, write_repository

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                           "population": {"type": "integer"}},
          "required": ["city", "population"], "additionalProperties": False}
# docs/playground.png is refreshed only when asked (CONCH_PLAYGROUND_SCREENSHOT=docs/playground.png): a test run
# never rewrites a tracked file.
SCREENSHOT = os.environ.get("CONCH_PLAYGROUND_SCREENSHOT")
# Records whether an assistant message ever held text while still streaming. A mutation observer runs after each
# chunk's DOM change, however fast the reply comes (polling for the selector missed replies that streamed
# whole between two polls).
SAW_TEXT_WHILE_STREAMING = """() => {
  window.sawTextWhileStreaming = false;
  new MutationObserver(() => {
    if (document.querySelector(".msg.assistant[data-streaming='true'] .content:not(:empty)"))
      window.sawTextWhileStreaming = true;
  }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {DEFAULT_MODEL_ID: {"weights": "builtin:smollm2"}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def page(server):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (scripts/ensure-chromium.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "/")                      # redirects to /playground
        yield page
        browser.close()


def test_root_redirects_and_static_files_are_served(server):
    r = httpx.get(server.url + "/", follow_redirects=False)
    assert r.status_code in (302, 307) and r.headers["location"] == "/playground"
    for path, kind in (("/playground", "text/html"), ("/playground/static/app.js", "javascript"),
                       ("/playground/static/style.css", "text/css")):
        got = httpx.get(server.url + path)
        assert got.status_code == 200 and kind in got.headers["content-type"]


def _send(page, text: str) -> None:
    page.fill("#prompt", text)
    page.click("#send")


def test_chat_streams_tokens(page):
    assert page.url.endswith("/playground")
    page.wait_for_function(f"document.querySelector('#model').value === {json.dumps(DEFAULT_MODEL_ID)}")
    page.fill("#max-tokens", "48")
    page.evaluate(SAW_TEXT_WHILE_STREAMING)
    _send(page, "Write one sentence about the sea.")
    page.wait_for_selector(".msg.assistant[data-streaming='false']", timeout=180_000)
    assert page.evaluate("window.sawTextWhileStreaming")        # text showed before the reply ended
    reply = page.locator(".msg.assistant").last
    assert int(reply.get_attribute("data-chunks")) > 1
    assert reply.locator(".content").inner_text().strip()
    assert page.inner_text("#status").startswith("done")
    assert '"stream": true' in page.inner_text("#curl")


def test_schema_mode_returns_valid_json(page):
    page.click("#clear")
    page.check("input[name=mode][value=schema]")
    page.fill("#schema", json.dumps(SCHEMA, indent=2))
    page.fill("#max-tokens", "96")
    _send(page, "Name a large city and its population as JSON.")
    page.wait_for_selector(".msg.assistant[data-streaming='false']", timeout=180_000)
    text = page.locator(".msg.assistant .content").last.inner_text()
    jsonschema.validate(json.loads(text), SCHEMA)
    assert "valid JSON" in page.inner_text("#status")
    assert '"json_schema"' in page.inner_text("#curl")
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)


def test_tools_mode_streams_a_tool_call(page):
    page.click("#clear")
    page.check("input[name=mode][value=tools]")
    page.select_option("#tool-choice", "required")
    page.fill("#max-tokens", "40")
    _send(page, "What is the weather in Paris?")
    page.wait_for_selector(".msg.assistant[data-streaming='false']", timeout=120_000)
    call = page.locator(".msg.assistant .tool-call").first.inner_text()
    name, _, args = call.partition("(")
    assert name == "get_weather" and "city" in json.loads(args.removesuffix(")"))
