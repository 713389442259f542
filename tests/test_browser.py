"""The HTML report in a real browser: headless Chromium opens a nightly run's ``report/index.html``.

The run is real and cheap: a small simulated dump is ingested into a local
store, planned and fitted by the nightly library functions (``plan_fits``,
``fit_and_tabulate`` with figures, ``publish_run``) without Prefect or Dask,
which writes ``results/<run_id>/report/index.html``. Chromium (Debian's
``chromium``; ``.ci/run`` installs it) then loads that file at a 1400 px wide
viewport, driven over the Chrome DevTools Protocol through a WebSocket
(``websockets``' synchronous client, already in the lock through Prefect), and
the page must meet this contract:

(a) it loads with no console error: no uncaught exception, no
    ``console.error``/``console.assert``, no error in the browser log and no
    failed resource load;
(b) every figure (``<img>``) is decoded and drawn at a non-zero natural and
    rendered size, and the page shows as many figures as the run wrote PNGs;
(c) no text overflows its table: every table fits in its container's content
    box, no cell's content is wider than the cell, and the page has no
    horizontal scroll.

A full-page screenshot and the measurements are kept as test artifacts, in
the test's ``tmp_path`` and in ``$JURYMETER_TEST_ARTIFACTS`` (default
``test-artifacts/`` at the repository root, which git ignores):
``report-1400.png`` and ``report-1400.json``. They are written before the
assertions, so a failing run keeps them.

The checks are shown to bite: the same inspection of copies of the page with
one injected defect each (an uncaught script error, a ``console.error``, a
missing image file, an undecodable PNG, a hidden image, an over-wide cell, a
clipped cell) reports that defect and nothing else.

Chromium missing is a skip locally and a failure in CI (``CI`` set), as for
R in ``tests/test_vs_lme4.py``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1400
HEIGHT = 1000
RUN_ID = "20260101T021500Z"
CHROMIUM = shutil.which("chromium")
# Flags that run as root on a bare machine (CI): no sandbox, no GPU, nothing fetched from outside.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
)
# A rounding pixel: layout widths are fractional, scrollWidth/clientWidth are rounded.
SLACK = 1.0

# In CI (CI=true) a missing chromium is a failure, not a skip: .ci/run installs it.
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="chromium not installed (apt-get install chromium); .ci/run installs it in CI",
)
pytestmark = [pytest.mark.slow, needs_chromium]


def artifact_dir() -> Path:
    """Where screenshots are kept: ``$JURYMETER_TEST_ARTIFACTS``, else ``test-artifacts/``."""
    return Path(os.environ.get("JURYMETER_TEST_ARTIFACTS") or ROOT / "test-artifacts")


# ------------------------------------------------------------------ the browser


class DevToolsPage:
    """One browser tab over the DevTools Protocol: commands, and the events they cause."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        # A full-page screenshot is one message of several MB.
        self._ws = connect(url, max_size=None, open_timeout=20)
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        self._ws.close()

    def _receive(self, deadline: float) -> dict[str, Any]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from chromium in time")
        message = json.loads(self._ws.recv(timeout=left))
        if "method" in message:
            self.events.append(message)
        return message

    def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def wait_for(self, method: str, since: int, timeout: float = 30.0) -> dict[str, Any]:
        """The first event ``method`` at or after index ``since`` of :attr:`events`."""
        deadline = time.monotonic() + timeout
        seen = since
        while True:
            for event in self.events[seen:]:
                if event["method"] == method:
                    return event
            seen = len(self.events)
            self._receive(deadline)

    def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        result = self.send(
            "Runtime.evaluate", timeout, expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")


class Chromium:
    """A headless Chromium with its DevTools endpoint on a free loopback port."""

    def __init__(self, executable: str, workdir: Path) -> None:
        profile = workdir / "profile"
        profile.mkdir(parents=True)
        self._log = workdir / "chromium.log"
        with self._log.open("wb") as log:
            self.process = subprocess.Popen(
                [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                 "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                 f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        try:
            self.endpoint = f"http://127.0.0.1:{self._port(profile / 'DevToolsActivePort')}"
        except BaseException:
            self.stop()
            raise

    def _port(self, active: Path, timeout: float = 60.0) -> int:
        # Chromium writes the port it bound (and the browser target's path) once it listens.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            lines = active.read_text().splitlines() if active.exists() else []
            if len(lines) >= 2:
                return int(lines[0])
            time.sleep(0.05)
        tail = self._log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"chromium did not open its DevTools port (exit {self.process.poll()}):\n{tail}")

    def _http(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(request, timeout=20) as response:
            return json.loads(response.read() or b"null")

    def new_page(self) -> tuple[str, DevToolsPage]:
        target = self._http("/json/new?about:blank", method="PUT")
        return target["id"], DevToolsPage(target["webSocketDebuggerUrl"])

    def close_page(self, target: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/json/close/{target}")
        with urllib.request.urlopen(request, timeout=20):
            pass

    def stop(self) -> None:
        """End the browser this object started, then whatever is left of its process group."""
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        # Its renderer and helper processes, in the session it was started in.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


# ------------------------------------------------------------------ what the page shows

# Runs in the loaded page: waits for every image to decode, then measures.
MEASURE = r"""
(async () => {
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  await document.fonts.ready;
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const round = v => Math.round(v * 10) / 10;
  // Where an element is, for a reader: its section, the heading above it, its place there.
  const where = el => {
    const section = el.closest('section');
    let heading = null;
    for (let node = el; node && !heading; node = node.parentElement) {
      for (let prev = node.previousElementSibling; prev; prev = prev.previousElementSibling) {
        if (/^H[1-6]$/.test(prev.tagName)) { heading = prev; break; }
      }
      if (node === section) break;
    }
    const name = section ? `section#${section.id}` : 'body';
    return heading ? `${name} "${heading.textContent.trim()}"` : name;
  };
  const contentWidth = el => {
    const style = getComputedStyle(el);
    return el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  };
  const images = [...document.images].map((img, index) => {
    const box = img.getBoundingClientRect();
    return {index, where: where(img), alt: img.alt, src: img.src.slice(0, 60), complete: img.complete,
            natural: [img.naturalWidth, img.naturalHeight], rendered: [round(box.width), round(box.height)]};
  });
  const tables = [...document.querySelectorAll('table')].map((table, index) => {
    const box = table.getBoundingClientRect();
    const container = table.parentElement;
    const bounds = container.getBoundingClientRect();
    const left = bounds.left + container.clientLeft + parseFloat(getComputedStyle(container).paddingLeft);
    return {index, where: where(table), width: round(box.width), available: round(contentWidth(container)),
            right: round(box.right), container_right: round(left + contentWidth(container)),
            scroll: table.scrollWidth, client: table.clientWidth};
  });
  const cells = [...document.querySelectorAll('table')].flatMap((table, t) =>
    [...table.querySelectorAll('th, td')].map(cell => ({
      table: t, where: where(table), text: cell.textContent.trim().slice(0, 80),
      scroll: cell.scrollWidth, client: cell.clientWidth})));
  const root = document.documentElement;
  return {title: document.title, images, tables, cells,
          page: {scroll_width: root.scrollWidth, viewport: window.innerWidth,
                 content: [root.scrollWidth, root.scrollHeight]}};
})()
"""


@dataclass
class Inspection:
    """What Chromium made of one page: its errors, its measurements, a screenshot."""

    errors: list[str]
    measures: dict[str, Any]
    screenshot: bytes


def _errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions, error log entries and failed loads, one line each."""
    urls = {e["params"]["requestId"]: e["params"]["request"]["url"]
            for e in events if e["method"] == "Network.requestWillBeSent"}
    out = []
    for event in events:
        method, params = event["method"], event["params"]
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "")
            out.append(f"uncaught exception: {text.splitlines()[0] if text else details}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            out.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            url = urls.get(params["requestId"], "?")
            out.append(f"failed load: {url[:100]}: {params.get('errorText')}")
    return out


def inspect_page(browser: Chromium, page: Path, probe: str | None = None) -> Inspection:
    """Load ``page`` at WIDTH px in a fresh tab; errors, measurements and a full-page screenshot."""
    target, tab = browser.new_page()
    try:
        tab.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                 deviceScaleFactor=1, mobile=False)
        for domain in ("Page", "Runtime", "Log", "Network"):
            tab.send(f"{domain}.enable")
        since = len(tab.events)
        navigated = tab.send("Page.navigate", url=page.resolve().as_uri())
        if navigated.get("errorText"):
            raise RuntimeError(f"chromium could not open {page}: {navigated['errorText']}")
        tab.wait_for("Page.loadEventFired", since)
        measures = tab.evaluate(MEASURE)
        if probe is not None:
            measures["probe"] = tab.evaluate(probe)
        width, height = measures["page"]["content"]
        shot = tab.send("Page.captureScreenshot", 60.0, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        return Inspection(_errors(tab.events[since:]), measures, base64.b64decode(shot["data"]))
    finally:
        tab.close()
        browser.close_page(target)


def problems(inspection: Inspection) -> dict[str, list[str]]:
    """Each part of the contract and what breaks it on the page (empty lists: it holds)."""
    m = inspection.measures
    images = [
        f"<img> {i['index']} ({i['where']}, alt {i['alt']!r}, src {i['src']!r}): "
        f"natural {i['natural'][0]}x{i['natural'][1]}, rendered {i['rendered'][0]}x{i['rendered'][1]}"
        f"{'' if i['complete'] else ', not complete'}"
        for i in m["images"]
        if not i["complete"] or min(i["natural"]) <= 0 or min(i["rendered"]) <= 0
    ]
    tables = [
        f"table {t['index']} ({t['where']}) is {t['width']} px wide in a {t['available']} px container: "
        f"{round(max(t['width'] - t['available'], t['right'] - t['container_right']), 1)} px over"
        for t in m["tables"]
        if t["width"] > t["available"] + SLACK or t["right"] > t["container_right"] + SLACK
        or t["scroll"] > t["client"] + SLACK
    ]
    tables += [
        f"cell of table {c['table']} ({c['where']}) {c['text']!r}: content {c['scroll']} px "
        f"in {c['client']} px, {c['scroll'] - c['client']} px over"
        for c in m["cells"]
        if c["scroll"] > c["client"] + SLACK
    ]
    page = m["page"]
    if page["scroll_width"] > page["viewport"] + SLACK:
        tables.append(f"the page scrolls sideways: {page['scroll_width']} px wide in a {page['viewport']} px viewport")
    return {"console": inspection.errors, "figures": images, "overflow": tables}


# ------------------------------------------------------------------ fixtures


@dataclass(frozen=True)
class PublishedRun:
    report: Path  # results/<run_id>/report
    figures: list[str]  # the PNG files the run wrote

    @property
    def page(self) -> Path:
        return self.report / "index.html"

    @property
    def pages(self) -> list[Path]:
        """The index, then every fit's page."""
        return [self.page, *sorted((self.report / "fits").glob("*.html"))]


def _published(report: Path) -> PublishedRun:
    return PublishedRun(report=report, figures=sorted(p.name for p in report.glob("*.png")))


@pytest.fixture(scope="module")
def published_run(tmp_path_factory: pytest.TempPathFactory) -> PublishedRun:
    """A nightly run folder on a small simulated dump (the demo's shape), published by the library, without Prefect."""
    from published import publish_small_run

    root = publish_small_run(tmp_path_factory.mktemp("browser-run"), RUN_ID)
    return _published(root / "results" / RUN_ID / "report")


@pytest.fixture(scope="module")
def samples_run(tmp_path_factory: pytest.TempPathFactory) -> PublishedRun:
    """Every real sample log (MT-Bench, Arena-Hard-Auto, AlpacaEval, inspect_ai) ingested and run as a new user would."""
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run
    from samples import SAMPLES

    root = tmp_path_factory.mktemp("browser-samples")
    store = Store(str(root / "store"))
    paths = [p for folder in sorted(SAMPLES.iterdir()) if folder.is_dir()
             for p in sorted(folder.iterdir()) if p.suffix in (".jsonl", ".json", ".eval")]
    ingested = ingest(store, discover_sources([str(p) for p in paths]), ValidationOptions()).to_json()
    config_path = root / "jm.toml"
    config_path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 40\n')
    config = load_config(config_path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)
    publish_run(store, "samples", config=config, started="2026-01-01T02:15:00+00:00", ingest_report=ingested,
                outcomes=outcomes, timings={}, skipped=plan.skipped)
    return _published(Path(store.root) / "results" / "samples" / "report")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    if CHROMIUM is None:
        pytest.fail("chromium is not on PATH in CI: .ci/run must install it (apt-get install chromium)")
    chromium = Chromium(CHROMIUM, tmp_path_factory.mktemp("chromium"))
    try:
        yield chromium
    finally:
        chromium.stop()


def _keep(tmp_path: Path, name: str, inspection: Inspection) -> list[Path]:
    """Write the screenshot and the measurements under tmp_path and the artifact folder."""
    kept = []
    for folder in (tmp_path, artifact_dir()):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(inspection.screenshot)
        (folder / f"{name}.json").write_text(
            json.dumps({"errors": inspection.errors, **inspection.measures}, indent=1)
        )
        kept.append(folder / f"{name}.png")
    return kept


# ------------------------------------------------------------------ tests


# What a reader reads: the page's text and its glossary line (issue 24, point 6).
WORDS = r"""
(() => ({text: document.body.innerText,
         glossary: (document.getElementById('glossary') || {innerText: ''}).innerText}))()
"""


def _inspect_every_page(browser: Chromium, run: PublishedRun, tmp_path: Path, name: str) -> dict[str, Inspection]:
    """Each page of a run inspected; screenshots kept as ``<name>-<page>-1400.png`` (before any assertion)."""
    seen = {}
    for page in run.pages:
        inspection = inspect_page(browser, page, WORDS)
        label = "index" if page.name == "index.html" else f"fit-{len(seen):02d}"
        _keep(tmp_path, f"{name}-{label}-{WIDTH}", inspection)
        seen[page.name if label == "index" else f"fits/{page.name}"] = inspection
    return seen


def _assert_clean(inspections: dict[str, Inspection], run: PublishedRun) -> None:
    found = {page: problems(i) for page, i in inspections.items()}
    for part in ("console", "figures", "overflow"):
        bad = {page: f[part] for page, f in found.items() if f[part]}
        assert bad == {}, f"{part}: {bad}"
    # Every PNG the run wrote is drawn on exactly one page (the index holds the history's figures).
    assert sum(len(i.measures["images"]) for i in inspections.values()) == len(run.figures)
    for page, inspection in inspections.items():
        assert inspection.screenshot.startswith(b"\x89PNG\r\n\x1a\n")
        if inspection.measures["tables"]:
            continue
        # A fit none of whose analyses could be estimated (the MT-Bench samples together: each
        # system judged by its own judge) has a page of reasons, one per analysis, and no table.
        text = (run.report / page).read_text()
        sections = text.count("<h3>")  # one an analysis
        assert page != "index.html", "the index always holds tables"
        assert sections, page
        assert text.count("Not fitted:") == sections, f"{page}: a page without a table must say why each analysis was not fitted"


def _assert_words(inspections: dict[str, Inspection], run: PublishedRun) -> None:
    """What the pages say, as a reader sees it (issue 24, points 1, 4 and 6): every symbol a page uses is
    explained in its glossary line before its first use; no count of tie groups beside pairs told
    apart; a headline that is not estimable is never a number (its cell says "not estimable")."""
    import re

    import orjson

    from jurymeter.render.text import GLOSSARY

    for page, inspection in inspections.items():
        text, glossary = inspection.measures["probe"]["text"], inspection.measures["probe"]["glossary"]
        start = text.find(glossary) if glossary else -1
        rest = text.replace(glossary, "") if glossary else text
        for term, marks, meaning in GLOSSARY:
            uses = [rest.find(m) for m in marks if m in rest]
            if not uses:
                continue
            assert f"{term}: {meaning}" in glossary, f"{page}: {term} is used but not explained"
            first = min(text.find(m, start + len(glossary)) for m in marks if m in rest)
            assert 0 <= start < first, f"{page}: {term} is used before the glossary line"
        assert not re.search(r"\b\d+ tie groups?\b", text), f"{page}: a count of tie groups"
    summary = orjson.loads((run.report.parent / "summary.json").read_bytes())
    index = inspections["index.html"].measures["probe"]["text"]
    reasons = [(part[key[:-len("_reason")]], why) for fit in summary["fits"]
               for part in (fit.get("analyses") or {}).values()
               for key, why in part.items() if key.endswith("_reason") and why]
    assert index.count("not estimable") >= len(reasons)
    for fit, line in zip(summary["fits"], summary["headlines"]["fits"], strict=True):
        part = (fit.get("analyses") or {}).get("pairwise") or {}
        if part.get("slot_a_advantage_reason"):
            assert "position bias not estimable: " + part["slot_a_advantage_reason"] in line["sentence"]
            assert "position bias 0.0" not in index


def test_the_index_and_every_fit_page_of_a_demo_run_load_clean_with_every_figure_drawn_and_no_overflow(
    browser: Chromium, published_run: PublishedRun, tmp_path: Path
) -> None:
    inspections = _inspect_every_page(browser, published_run, tmp_path, "demo")
    assert inspections["index.html"].measures["title"] == f"jurymeter run {RUN_ID}"
    # Two pointwise fits, each with the E rho^2 curve, nomogram, budget, rank ranges, judge effects, strategies,
    # judge offsets and serial dependence; two pairwise fits, each with position bias, reversals,
    # judge agreement, ratings, rank ranges and the family support matrix (no history: a first run).
    assert len(inspections) == 5
    assert len(published_run.figures) == 28
    _assert_clean(inspections, published_run)
    _assert_words(inspections, published_run)


def test_the_index_and_every_fit_page_of_a_real_sample_run_load_clean(
    browser: Chromium, samples_run: PublishedRun, tmp_path: Path
) -> None:
    import orjson

    inspections = _inspect_every_page(browser, samples_run, tmp_path, "samples")
    summary = orjson.loads((samples_run.report.parent / "summary.json").read_bytes())
    # A page for every fit that did not fail (a failed fit's error is an alert on the index).
    assert len(inspections) == 1 + sum(f["status"] != "failed" for f in summary["fits"]) >= 5
    _assert_clean(inspections, samples_run)
    _assert_words(inspections, samples_run)
    # AlpacaEval's order is unknown for most judgments: said, not a 0.0 (issue 24, point 4).
    alpaca = next(f for f in summary["fits"] if f["item_set"] == "alpaca-eval")
    assert alpaca["analyses"]["pairwise"]["slot_a_advantage_reason"].startswith("order unknown for ")
    # Each pairwise fit page without ratings shows the Ratings header with the reason.
    for page, inspection in inspections.items():
        text = inspection.measures["probe"]["text"]
        if "Pairwise judging" in text and "rating_elo" not in text and page != "index.html":
            assert "No Bradley-Terry ratings: " in text, page


HOSTILE = '<img src=x onerror="console.error(\'escaped-not\')">&amp;"\'$x^2$'


def test_hostile_names_stay_escaped_on_every_page_in_the_browser(
    browser: Chromium, published_run: PublishedRun, tmp_path: Path
) -> None:
    """The demo run's tables and summary with its item set renamed to markup, rendered again: on
    every page the name is text (a script in it would log an error), and no element came from it."""
    import orjson
    import polars as pl

    from jurymeter.io.store import Store
    from jurymeter.pipeline.publish import read_run, write_report

    store_root = published_run.report.parents[2]
    tables, summary = read_run(Store(str(store_root)), f"results/{RUN_ID}")
    renamed = {n: (t.with_columns(pl.col("item_set").str.replace("sim-chat", HOSTILE, literal=True))
                   if "item_set" in t.columns else t) for n, t in tables.items()}
    text = orjson.dumps(summary).decode().replace("sim-chat", HOSTILE.replace("\\", "\\\\").replace('"', '\\"'))
    summary = orjson.loads(text)
    summary["run_id"] = HOSTILE
    summary.pop("headlines")  # said again from the renamed fits
    target = Store(str(tmp_path / "store"))
    write_report(target, "results/hostile", renamed, summary)
    run = _published(tmp_path / "store" / "results" / "hostile" / "report")
    assert len(run.pages) == 5
    for page in run.pages:
        inspection = inspect_page(browser, page, probe=PROBE_HOSTILE)
        assert inspection.errors == [], (page.name, inspection.errors)
        probe = inspection.measures["probe"]
        assert probe["onerror"] == 0, page.name
        assert probe["text_has_name"], page.name


PROBE_HOSTILE = r"""
({onerror: document.querySelectorAll('[onerror]').length,
  text_has_name: document.body.innerText.includes('<img src=x onerror=')})
"""


BROKEN_PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nnot a png").decode()
# Each defect injected into a copy of the real page, and what the inspection must then say.
DEFECTS = {
    "script-error": ("</body>", "<script>nonexistent()</script></body>", "console", "nonexistent"),
    "console-error": ("</body>", "<script>console.error('drawn wrong')</script></body>", "console", "drawn wrong"),
    "missing-image": ("</body>", '<figure><img src="missing.png" alt="gone"></figure></body>', "console", "missing.png"),
    "undecodable-image": ("</body>", f'<figure><img src="{BROKEN_PNG}" alt="broken"></figure></body>', "figures", "'broken'"),
    "zero-size-image": ('<img src="', '<img style="display:none" src="', "figures", "rendered 0"),
    "over-wide-cell": ("<td>", "<td>" + "x" * 300, "overflow", "px over"),
    "clipped-cell": ("<td>", '<td style="max-width:20px;overflow:hidden;white-space:nowrap">' + "y" * 40, "overflow", "yyyy"),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_the_inspection_reports_an_injected_defect(
    browser: Chromium, published_run: PublishedRun, tmp_path: Path, defect: str
) -> None:
    old, new, part, needle = DEFECTS[defect]
    fit_page = published_run.pages[1]  # a fit's page: it has figures and tables
    text = fit_page.read_text()
    assert old in text
    page = tmp_path / fit_page.name
    page.write_text(text.replace(old, new, 1))
    found = problems(inspect_page(browser, page))
    assert any(needle in line for line in found[part]), found
    others = {k: v for k, v in found.items() if k != part and v}
    if defect == "missing-image":  # a missing file is also a figure never drawn
        others.pop("figures", None)
    assert others == {}, others
