"""Open reports in a real browser: Debian's Chromium driven by its ChromeDriver (Selenium), with the network off
(docs/reports.md; ``apt-get install chromium chromium-driver``, :func:`find` says why they cannot be used).

:func:`check` loads a page from disk and returns what a reader would find wrong: an image that did not load or has
no alternative text of its own, TeX left unrendered (``$$``, ``\(``, ``\frac`` …) or a MathML error, a table number
with more digits than a reader can use (:func:`too_precise`) or pandas' raw HTML, a table word laid out on two lines,
a figure whose check (``data-bl-*`` attributes of :meth:`biaslab.report.outputs.OutputDir.figure`) found its legend over
data or a marker clipped, a request to anything but a local file or data URI, a local file that failed to load, a
broken link, and a console error; it measures where the decision panel ends (:attr:`PageReport.decision_bottom`, at
1280 px by default). :func:`screenshot` and :func:`pdf` photograph and print a page through the same browser.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse
from urllib.request import url2pathname

#: Chromium's flags: headless, and none of its own connections (update checks, metrics, sync, DNS look-ups of
#: Google's hosts) — on a closed network those fail at every start.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
         "--disable-extensions", "--disable-domain-reliability", "--disable-client-side-phishing-detection",
         "--no-default-browser-check", "--metrics-recording-only", "--hide-scrollbars", "--force-color-profile=srgb",
         "--host-resolver-rules=MAP * ~NOTFOUND")
#: URL schemes a report may load from: its own folder, data URIs.
LOCAL_SCHEMES = ("file", "data", "blob", "about")
INSTALL = "apt-get install chromium chromium-driver (Debian; as root)"


def find() -> tuple[str, str]:
    """Paths of the Chromium and ChromeDriver binaries; raises FileNotFoundError saying how to install them."""
    chromium = os.environ.get("BIASLAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("BIASLAB_CHROMEDRIVER") or shutil.which("chromedriver")
    missing = [n for n, p in (("chromium", chromium), ("chromedriver", driver)) if not p]
    if missing:
        raise FileNotFoundError(f"{' and '.join(missing)} not found: {INSTALL}")
    return chromium, driver


@dataclass
class PageReport:
    """What :func:`check` found on one page."""
    path: Path
    images: int = 0
    links: int = 0
    math: int = 0
    numbers: list[str] = field(default_factory=list)
    alts: list[str] = field(default_factory=list)
    #: bottom of the decision panel (``#bl-decision``) in CSS px from the page's top, and the page's width then
    decision_bottom: float | None = None
    width: int = 0
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"{self.path}: {self.images} images, {self.math} formulas, {self.links} links, " \
               f"{len(self.requests)} local requests"
        return head + "".join(f"\n  - {p}" for p in self.problems)


@contextmanager
def chromium(width: int = 1280, height: int = 1000):
    """A headless Chromium (Selenium WebDriver) with the network switched off and its console and network logged."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = find()
    profile = tempfile.mkdtemp(prefix="biaslab-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    try:
        driver.set_page_load_timeout(60)
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# Collected in the page once it has loaded.
_INSPECT = r"""
const strip = document.body.cloneNode(true);
strip.querySelectorAll('pre, code, script, style, textarea').forEach(e => e.remove());
return {
  images: [...document.images].map(i => ({src: i.getAttribute('src').slice(0, 120), ok: i.complete && i.naturalWidth > 0,
                                          alt: i.getAttribute('alt')})),
  links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
  text: strip.textContent,
  math: document.querySelectorAll('math').length,
  mathErrors: [...document.querySelectorAll('merror')].map(e => e.textContent.slice(0, 120)),
  numbers: [...document.querySelectorAll('table.bl-table td.bl-num')].map(td => td.textContent.trim()),
  rawTables: document.querySelectorAll('table.dataframe').length,
  broken: brokenWords(),
  decisionBottom: (e => e ? e.getBoundingClientRect().bottom + window.scrollY : null)(
    document.getElementById('bl-decision')),
  width: window.innerWidth,
  figureChecks: [...document.images].filter(i => i.dataset.blLegendOverData || i.dataset.blClipped).map(i =>
    ({alt: (i.getAttribute('alt') || '').slice(0, 60), legend: +(i.dataset.blLegendOverData || 0),
      clipped: +(i.dataset.blClipped || 0)})),
};
// Words and numbers of table cells laid out on more than one line (their text boxes' tops differ).
function brokenWords() {
  const out = [], range = document.createRange();
  for (const cell of document.querySelectorAll('td, th')) {
    // provenance (hashes, paths) and parameter code wrap anywhere by design: results tables only
    if (cell.offsetParent === null || cell.closest('.bl-footer, table.bl-params')) continue;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.textContent.matchAll(/\S+(?:[ \u00a0]%)?/g)) {
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) out.push(m[0].slice(0, 40));
        if (out.length >= 50) return out;
      }
    }
  }
  return out;
}
"""
#: nbconvert's alternative text for an image that has none.
NO_ALT = "No description has been provided for this image"
# TeX that a browser shows as typed when it was not converted: display/inline delimiters and a few commands that never occur in prose.
_RAW_TEX = ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{", "\\frac", "\\mathbf", "\\mathrm", "\\text{", "\\sum",
            "\\tilde", "\\bar", "\\log", "\\underbrace", "\\sqrt", "\\times", "\\le ", "\\ge ")


def _settle(driver, timeout: float = 30) -> None:
    """Wait until the page has loaded."""
    end = time.time() + timeout
    while time.time() < end and driver.execute_script("return document.readyState") != "complete":
        time.sleep(0.1)


def _open(driver, path: Path) -> None:
    driver.get(Path(path).resolve().as_uri())
    _settle(driver)


def _write(out: Path, data: str) -> Path:
    """Write the base64 ``data`` Chromium returned to ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(data))
    return out


def too_precise(text: str) -> bool:
    """Whether a table's number shows more than 3 significant digits after its decimal point (or in its mantissa),
    or writes zero with decimals ("0.000"); integers, "< 0.001" and "–" pass."""
    t = text.replace("\u00a0", " ").replace(",", "").replace("%", "").replace("−", "-").strip()
    if t in ("", "–", "-", "< 0.001", "∞", "-∞") or not re.fullmatch(r"[-+]?\d*\.?\d+(e[-+]?\d+)?", t):
        return False
    mantissa = t.split("e")[0].lstrip("+-")
    if "." not in mantissa and "e" not in t:
        return False                                   # an integer: a count, or an estimate of 100 or more
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) > 3 or (not digits and "." in mantissa)


def _requests(driver) -> tuple[list[str], list[str]]:
    """(every URL the page requested, the ones that failed with Chromium's reason) from the performance log."""
    urls, failed, by_id = [], [], {}
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            by_id[msg["params"]["requestId"]] = url
            urls.append(url)
        elif msg["method"] == "Network.loadingFailed" and not msg["params"].get("canceled"):
            url = by_id.get(msg["params"]["requestId"], "?")
            failed.append(f"{url[:160]} ({msg['params'].get('errorText', '')}"
                          f"{', blocked: ' + msg['params']['blockedReason'] if msg['params'].get('blockedReason') else ''})")
    return urls, failed


def _local_path(url: str) -> Path | None:
    p = urlparse(url)
    return Path(url2pathname(unquote(p.path))) if p.scheme == "file" else None


def _has_anchor(page: Path, fragment: str, ids: set | None) -> bool:
    """Whether ``page`` has an element with id (or name) ``fragment``: the rendered page's ids for the page open in
    the browser, the HTML source of another page (a report's link into the index or another report); a link into a
    file that is not HTML cannot be checked and counts as resolved."""
    names = {fragment, unquote(fragment)}
    if ids is not None:
        return bool(names & ids)
    if page.suffix.lower() not in (".html", ".htm"):
        return True
    text = page.read_text(errors="replace")
    return any(f'{attr}="{n}"' in text or f"{attr}='{n}'" in text for n in names for attr in ("id", "name"))


def check(path: Path, driver=None) -> PageReport:
    """Open ``path`` from disk (network off) and report what does not display or resolve as it should."""
    if driver is None:
        with chromium() as d:
            return check(path, d)
    path = Path(path).resolve()
    driver.get_log("browser"), driver.get_log("performance")          # drop what an earlier page left
    _open(driver, path)
    page = driver.execute_script(_INSPECT)
    urls, failed = _requests(driver)
    report = PageReport(path, images=len(page["images"]), links=len(page["links"]), math=page["math"],
                        numbers=page["numbers"], alts=[img["alt"] or "" for img in page["images"]],
                        decision_bottom=page["decisionBottom"], width=page["width"],
                        requests=[u for u in urls if urlparse(u).scheme == "file"])
    problems = report.problems
    for img in page["images"]:
        if not img["ok"]:
            problems.append(f"image did not load: {img['src']}")
        if not (img["alt"] or "").strip() or img["alt"] == NO_ALT:
            problems.append(f"image without alternative text: {img['src'][:60]}")
    if page["rawTables"]:
        problems.append(f"{page['rawTables']} DataFrame(s) shown as pandas' raw HTML (every digit, an index "
                        "column): the notebook ran without biaslab.report.display's formatter")
    problems += [f"word or number broken across lines in a table: {word!r}" for word in page["broken"]]
    for fig in page["figureChecks"]:
        if fig["legend"]:
            problems.append(f"legend over {fig['legend']} data point(s) in the figure: {fig['alt']}")
        if fig["clipped"]:
            problems.append(f"{fig['clipped']} marker(s) clipped at the axes' edge in the figure: {fig['alt']}")
    problems += [f"table number with more digits than a reader can use: {number!r}"
                 for number in report.numbers if too_precise(number)]
    text = page["text"]
    problems += [f"unrendered TeX {raw!r} in the text: …{' '.join(text[max(0, i - 60):i + 60].split())}…"
                 for raw in _RAW_TEX if (i := text.find(raw)) >= 0]
    problems += [f"math that was not converted: {err}" for err in page["mathErrors"]]
    problems += [f"request outside the machine: {url[:160]}" for url in urls
                 if urlparse(url).scheme not in LOCAL_SCHEMES]
    problems += [f"failed to load: {f}" for f in failed]
    ids = set(page["ids"])
    for href in page["links"]:
        target = urljoin(path.as_uri(), href)
        parsed = urlparse(target)
        if parsed.scheme != "file":
            problems.append(f"link outside the machine: {href}")
            continue
        local = _local_path(target)
        if not local.exists():
            problems.append(f"link to a missing file: {href}")
        elif parsed.fragment and not _has_anchor(local, parsed.fragment, ids if local == path else None):
            problems.append(f"link to a missing anchor: {href}")
    problems += [f"console error: {entry.get('message', '')[:200]}" for entry in driver.get_log("browser")
                 if entry.get("level") == "SEVERE"]
    return report


#: The first screen a reviewer sees: Chromium at 1280 × 800 CSS pixels (:attr:`PageReport.decision_bottom`).
FIRST_SCREEN = (1280, 800)


def screenshot(path: Path, out: Path, driver=None, width: int = 1280, height: int = 1400, at: str | None = None,
               open_code: bool = False) -> Path:
    """A PNG of ``path`` as a reader sees it: a ``width`` × ``height`` window at the top of the page, or scrolled to
    the first heading whose text starts with ``at`` (or the element with that id)."""
    if driver is None:
        with chromium(width, height) as d:
            return screenshot(path, out, d, width, height, at, open_code)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    try:
        _open(driver, path)
        if open_code:
            driver.execute_script("document.querySelector('.bl-code-toggle')?.click()")
        if at and not driver.execute_script(
                "const e = document.getElementById(arguments[0]) || [...document.querySelectorAll('h1, h2, h3')]"
                "  .find(h => h.textContent.trim().startsWith(arguments[0])); if (!e) return false;"
                "window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 12); return true", at):
            raise ValueError(f"{path} has no heading starting with {at!r} (nor an element with that id)")
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return _write(out, shot["data"])


def pdf(path: Path, out: Path, driver=None) -> Path:
    """Print ``path`` to PDF (A4, backgrounds, code as folded in the page)."""
    if driver is None:
        with chromium() as d:
            return pdf(path, out, d)
    _open(driver, path)
    printed = driver.execute_cdp_cmd("Page.printToPDF", {"printBackground": True, "paperWidth": 8.27,
                                                         "paperHeight": 11.69, "preferCSSPageSize": True})
    return _write(out, printed["data"])
