"""The model writer's budgets, measured in Chromium: its step time, and what a reader downloads.

    python .ci/bench_model_writer.py                 # builds the site, then measures
    python .ci/bench_model_writer.py --site DIR      # an existing build

Prints a table:

- the next-token step at T = 64: the widget's engine reads the 64th word
  (every layer and head writes its key and value and reads all 64 keys, then
  the logits, and keeps what each part wrote for its share of the logit), timed in batches, median over batches; budget 5 ms;
- one press of Step as the reader sees it at T = 63 (the step, then the
  words, probabilities and eight cache panels redrawn);
- regenerating 40 written words at once (what switching a head does);
- the bytes: the page's first visit (``support.build.page_weight``, gzip),
  the start box's script, and what pressing Start fetches (the widget's
  script and styles, the weights file), raw and gzip.

Budgets are measured, never asserted in tests (a loaded machine must not
fail the suite); this script only reports them.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from sitekit import nav  # noqa: E402
from sitekit.widgets import model_writer  # noqa: E402
from support.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from support.build import PAGE_BUDGET_BYTES, page_weight, site_or_build  # noqa: E402
from support.server import serve_site  # noqa: E402

PAGE = "write-with-the-model/index.html"
STEP_BUDGET_MS = 5.0

# In the page: the engine's read of word 64, BATCH times per sample, after 63 words.
_STEP = """(element) => {
  const api = element.modelWriter, engine = api.engine;
  const run = engine.newRun();
  engine.read(run, Array.from({ length: 63 }, (_, t) => (t * 7) % engine.nVocab));
  const samples = [];
  for (let sample = 0; sample < 40; sample++) {
    const start = performance.now();
    for (let i = 0; i < 25; i++) { engine.truncate(run, 63); engine.read(run, [5]); }
    samples.push((performance.now() - start) / 25);
  }
  return samples;
}"""

_REGENERATE = """(element) => {
  const box = element.querySelector('input[data-head="1,2"]');
  const samples = [];
  for (let i = 0; i < 10; i++) {
    const start = performance.now();
    box.click();
    samples.push(performance.now() - start);
  }
  return samples;
}"""


def sizes(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return len(data), len(gzip.compress(data, mtime=0))


def measure(site: Path) -> list[tuple[str, str, str]]:
    from playwright.sync_api import sync_playwright

    config = nav.read_config()
    rows = []
    with serve_site(site, config["site_url"].split("/", 3)[-1]) as root, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.goto(root + PAGE.removesuffix("index.html"))
        tab.locator('.model-writer[data-ready="true"] button.gw-start').click()
        element = tab.locator('.model-writer[data-model-state="ready"]')
        element.wait_for(timeout=60_000)
        steps = element.evaluate(_STEP)
        rows.append(("next-token step at T = 64 (engine)", f"{statistics.median(steps):.3f} ms "
                     f"(min {min(steps):.3f}, max {max(steps):.3f})", f"<= {STEP_BUDGET_MS} ms"))
        step = element.get_by_role("button", name="Step", exact=True)
        while int(element.get_attribute("data-words")) < 63:
            step.click()
        pressed = tab.evaluate("""() => {
          const button = [...document.querySelectorAll('.model-writer button')].find(b => b.textContent === 'Step');
          const start = performance.now();
          button.click();
          return performance.now() - start;
        }""")
        rows.append(("one press of Step at T = 63, with the redraw", f"{pressed:.1f} ms", "-"))
        element.locator("select[id$='-preset']").select_option("0")
        for _ in range(40):
            step.click()
        regenerated = element.evaluate(_REGENERATE)
        rows.append(("a head switched: 57 words read again (17 + 40 written), with the redraw",
                     f"{statistics.median(regenerated):.1f} ms (median of 10)", "-"))
        browser.close()
    raw, compressed = page_weight(site, PAGE)
    rows.append(("the page's first visit (page_weight, gzip)", f"{compressed / 1000:.1f} kB (raw {raw / 1000:.0f} kB)",
                 f"<= {PAGE_BUDGET_BYTES / 1000:.0f} kB"))
    start_box = sizes(site / model_writer.SCRIPT)
    rows.append(("+ the start box's script (widgets.js loads it)", f"{start_box[1] / 1000:.1f} kB gzip", "-"))
    page_dir = (site / PAGE).parent
    for label, path in (("on Start: the widget's script", site / model_writer.APP_SCRIPT),
                        ("on Start: its styles", site / model_writer.APP_STYLES),
                        ("on Start: the weights file", page_dir / model_writer.WEIGHTS_FILE)):
        raw_size, gz = sizes(path)
        rows.append((label, f"{raw_size / 1000:.1f} kB raw, {gz / 1000:.1f} kB gzip", "-"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="a built site (default: build one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = site_or_build(args.site, tmp)
        if site is None:
            return 1
        rows = measure(site)
    print("| measure | value | budget |")
    print("|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
