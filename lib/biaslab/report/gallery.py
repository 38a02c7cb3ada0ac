"""The screenshots of two reports that docs/reports.md shows (``biaslab report screenshot``): one with math
(notebook 4), one with many figures (notebook 1 on SSQA), rendered from the executed notebooks under ``outputs/``."""

from __future__ import annotations

from pathlib import Path

from . import browser
from .html import render

#: (run folder under outputs/, PNG name, heading the window is scrolled to — None: the top of the report, height)
SHOTS = (
    ("04_agentic_entropy", "04_agentic_entropy_top.png", None, 1100),
    ("04_agentic_entropy", "04_agentic_entropy_math.png", "The metric", 1100),
    ("01_multifactor/ssqa", "01_multifactor_ssqa_figures.png", "4. Subgroup analysis", 1900),
)
WIDTH = 1280


def take(outputs_dir: Path, dest: Path) -> list[Path]:
    """Render the reports of :data:`SHOTS` beside their notebooks and photograph them into ``dest``."""
    outputs_dir, dest = Path(outputs_dir), Path(dest)
    reports = {}
    for run, *_ in SHOTS:
        if run not in reports:
            folder = outputs_dir / run
            executed = folder / f"{run.split('/')[0]}.ipynb"
            if not executed.exists():
                raise FileNotFoundError(f"{executed} does not exist: run `make reproduce` (or biaslab reproduce "
                                        f"--publish --only {run}) first")
            reports[run] = render(executed)
    with browser.chromium() as driver:
        return [_compress(browser.screenshot(reports[run], dest / name, driver, WIDTH, height, at=at))
                for run, name, at, height in SHOTS]


def _compress(png: Path) -> Path:
    """Re-encode with an adaptive 256-colour palette (text and plots stay sharp; a third of the size)."""
    from PIL import Image
    with Image.open(png) as im:
        im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)
    return png
