"""The built docs in a real browser: every page loads offline, logs no error, shows its formulas.

Builds the site (strict), serves it on 127.0.0.1 and opens every page in headless Chromium with
every other host unreachable. A page fails when it logs a console error (a JS exception, a file
that did not load), asks for anything off the site, shows LaTeX as text (`$...$`, `\\frac`,
a placeholder of the math hook), or holds a <math> element that the browser does not lay out as
MathML or that has no size. Skipped without Chromium, its driver or selenium: `.ci/run` installs
them (Debian's `chromium` and `chromium-driver`; selenium comes with the dev extras).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
pytest.importorskip("mkdocs", reason="mkdocs (the dev extras) builds the docs")

ROOT = Path(__file__).resolve().parents[1]
BROWSER = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)
DRIVER = shutil.which("chromedriver")
PLANTED = "planted-bad-page.html"  # written by the test that checks the checks
pytestmark = pytest.mark.skipif(
    BROWSER is None or DRIVER is None,
    reason="needs Chromium and chromedriver (apt-get install chromium chromium-driver)",
)

# Run in the page: what a reader would see that is not rendered math, and the state of each
# <math> element. Text inside code, scripts and math itself is not prose.
CHECK_PAGE = r"""
const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA", "NOSCRIPT"]);
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
  acceptNode(node) {
    for (let el = node.parentElement; el; el = el.parentElement) {
      if (skip.has(el.tagName) || el.namespaceURI === "http://www.w3.org/1998/Math/MathML") {
        return NodeFilter.FILTER_REJECT;
      }
    }
    return NodeFilter.FILTER_ACCEPT;
  },
});
const raw = [];
const latex = /\$\$|\$[^\s$][^$]*\$|\\[A-Za-z]+|tfmathml\d+x/;
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const m = node.data.match(latex);
  if (m) raw.push(node.data.trim().slice(0, 120));
}
const bad = [];
for (const m of document.getElementsByTagName("math")) {
  const box = m.getBoundingClientRect();
  const display = getComputedStyle(m).display;
  if (!display.includes("math") || box.width <= 0 || box.height <= 0) {
    bad.push(`${display} ${box.width}x${box.height}: ${m.textContent.slice(0, 60)}`);
  }
}
const origin = location.origin;
const offsite = performance.getEntriesByType("resource")
  .map((r) => r.name).filter((u) => !u.startsWith(origin) && !u.startsWith("data:"));
return {raw, bad, offsite, maths: document.getElementsByTagName("math").length,
        ready: document.readyState, title: document.title};
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the browser drops requests when it moves on (the search index): not our error


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        # Offline: any host but the local server fails to resolve, and the page logs the error.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _severe(entries) -> list[dict]:
    return [e for e in entries if e.get("level") == "SEVERE"]


def check(driver, url: str) -> tuple[list[str], int]:
    """What is wrong with the page at `url` (an empty list: nothing), and its <math> count."""
    driver.get_log("browser")  # drop what earlier pages left
    driver.get(url)
    state = driver.execute_script(CHECK_PAGE)
    problems = [f"console: {e['message']}" for e in _severe(driver.get_log("browser"))]
    if state["ready"] != "complete" or not state["title"]:
        problems.append(f"did not load ({state['ready']}, title {state['title']!r})")
    problems += [f"unrendered LaTeX: {text!r}" for text in state["raw"]]
    problems += [f"<math> not laid out: {text}" for text in state["bad"]]
    problems += [f"fetched off the site: {url}" for url in state["offsite"]]
    return problems, state["maths"]


def test_every_page_loads_and_renders_its_math(site, server, browser):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    pages = [p for p in pages if p != PLANTED]
    assert "ops/conv/index.html" in pages and any(p.startswith("tutorials/") for p in pages)
    failures, maths = {}, {}
    for page in pages:
        problems, maths[page] = check(browser, f"{server}/{page}")
        if problems:
            failures[page] = problems
    assert not failures, "\n".join(f"{p}:\n  " + "\n  ".join(v) for p, v in failures.items())
    # The pages that must have formulas do (so the checks above had something to check).
    for page in ("ops/conv/index.html", "ops/layers/index.html", "ops/softmax-losses/index.html"):
        assert maths[page] >= 10, f"{page} has {maths[page]} formulas"


def test_the_checks_catch_raw_latex_unrendered_math_and_errors(site, server, browser):
    """A planted bad page: raw LaTeX, an empty <math>, a script error and a missing file."""
    (site / PLANTED).write_text(
        "<!doctype html><html><head><title>planted</title></head><body>"
        "<p>Raw: $\\frac{a}{b}$ and \\sum_i x_i</p><p><math></math></p>"
        "<img src='missing.png'><script>undefined_function();</script></body></html>"
    )
    problems, _ = check(browser, f"{server}/{PLANTED}")
    found = "\n".join(problems)
    for expected in ("unrendered LaTeX", "<math> not laid", "undefined_function", "missing.png"):
        assert expected in found, found
