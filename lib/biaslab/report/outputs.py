"""Where a notebook writes: tables, figures and the provenance that goes into MANIFEST.json.

Every notebook creates one :class:`OutputDir` from its ``output_dir`` parameter and writes only through it::

    out = OutputDir(output_dir, PLAN)
    out.table(df, "bias_scores")                 # tables/bias_scores.csv (+ .md when markdown=True)
    out.figure(fig, "robustness")                # figures/robustness.png, shown in the notebook as saved
    out.record_model(lm.fingerprint)             # model ids and weight hashes for the manifest
    out.record_data(benchmark.sources)           # data files and sha256s for the manifest

The runner merges the run's ``provenance.json`` into ``MANIFEST.json`` (:mod:`biaslab.run.execute`); every warning
biaslab logs during the run is one of its notes (:class:`_NoteHandler`). Files are created with the user's umask
(not ``mkstemp``'s 0600). Creating the OutputDir also installs the display layer (:mod:`biaslab.report.display`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import warnings
from pathlib import Path

import pandas as pd

from . import display as _display
from ..files.redact import redact
from ..files.storage import atomic_write, atomic_write_text

#: Figures are saved at FIGURE_DPI (twice the shown resolution: sharp in print; the HTML report embeds that file) and
#: the executed notebook embeds a lighter copy rendered at SHOWN_DPI, its CSS size, so that a committed notebook stays
#: under ~2 MB (at 2x, notebook 1's SSQA run was 3.6 MB).
SHOWN_DPI = 110
FIGURE_DPI = 2 * SHOWN_DPI


class _NoteHandler(logging.Handler):
    """Every warning biaslab logs while a notebook runs (a score cache recovered or used read-only, a file hashed
    again because it changed, a response retried, labels outside the top-k, rows excluded) becomes a MANIFEST note.
    Repeats of one message template are counted into the first note instead of flooding the manifest."""

    def __init__(self, out: "OutputDir"):
        super().__init__(logging.WARNING)
        self.out = out
        self.first: dict[tuple, int] = {}        # (logger, template) -> index of its note
        self.repeats: dict[tuple, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.levelname.lower()} from {record.name}: {record.getMessage()}"
        except Exception:  # noqa: BLE001 - a malformed log call must not break the notebook
            return
        if not logging.getLogger().handlers and logging.lastResort is not None:
            logging.lastResort.handle(record)       # still shown in the notebook, as without this handler
        key = (record.name, str(record.msg))
        notes = self.out.provenance["notes"]
        if key not in self.first:
            self.first[key] = len(notes)
            self.out.note(text)
            return
        self.repeats[key] = self.repeats.get(key, 1) + 1
        i = self.first[key]
        notes[i] = notes[i].split(" [and ")[0] + f" [and {self.repeats[key] - 1} more like it]"
        self.out._save()


class OutputDir:
    def __init__(self, path: str | Path, plan=None):
        """``plan``: the :class:`biaslab.plan.Plan` the notebook decides with; its entry (the hash of the bytes it
        parsed) goes into the run's provenance."""
        self.path = Path(path)
        self.tables = self.path / "tables"
        self.figures = self.path / "figures"
        self.tables.mkdir(parents=True, exist_ok=True)
        self.figures.mkdir(parents=True, exist_ok=True)
        self._prov_file = self.path / "provenance.json"
        # which interpreter and library computed these tables: the runner refuses a run whose kernel differs from it
        self.provenance = {"models": {}, "data": {}, "notes": [],
                           "kernel": {"python": sys.executable, "biaslab": str(Path(__file__).resolve().parents[1])}}
        if plan is not None:
            self.provenance["analysis_plan"] = plan.entry()
        self._capture_warnings()
        self._save()
        _display.install()

    def _capture_warnings(self) -> None:
        """Record biaslab's warnings as this run's notes (one handler per process: the newest OutputDir's)."""
        logger = logging.getLogger("biaslab")
        for h in [h for h in logger.handlers if isinstance(h, _NoteHandler)]:
            logger.removeHandler(h)
        logger.addHandler(_NoteHandler(self))

    def table(self, df: pd.DataFrame, name: str, markdown: bool = False, index: bool = False,
              floatfmt: str = ".4g") -> None:
        """Write ``tables/<name>.csv`` at full precision (and a markdown rendering when the paper had a table); a
        long table shown later links this file. Returns None, so a call ending a cell adds no ``Out[]``."""
        p = self.tables / f"{name}.csv"
        atomic_write_text(p, df.to_csv(index=index))
        if markdown:
            atomic_write_text(self.tables / f"{name}.md", df.to_markdown(index=index, floatfmt=floatfmt) + "\n")
        _display.record_table(df, p, self.path)

    def text(self, text: str, name: str) -> None:
        atomic_write_text(self.tables / name, text)

    def figure(self, fig, name: str, dpi: int = FIGURE_DPI) -> None:
        """Save a matplotlib figure as ``figures/<name>.png`` after :func:`biaslab.plots.figure_check.check_figure`
        (a problem is recorded as a note in MANIFEST and warned about, or raised with ``BIASLAB_STRICT_FIGURES=1``),
        show a copy rendered at :data:`SHOWN_DPI` in the notebook (the file is saved at ``dpi``, twice that; the HTML
        report shows the file itself, named by the image's ``bl_file`` metadata, at the same CSS width) with
        alternative text stating its result (:func:`biaslab.report.display.figure_alt`) and the layout counts of
        :func:`biaslab.plots.figure_check.layout_counts` (the report's browser test reads them), and close the figure
        (a ``plt.show()`` after it adds nothing). Returns None, so a call ending a cell adds no ``Out[]``."""
        import matplotlib.pyplot as plt
        from IPython.display import Image, display

        from ..plots.figure_check import layout_counts

        path = self._save_figure(fig, name, dpi)
        alt = _display.figure_alt(fig)
        counts = layout_counts(fig)
        shown = io.BytesIO()
        fig.savefig(shown, dpi=SHOWN_DPI, bbox_inches="tight", format="png")
        plt.close(fig)
        data = shown.getvalue()
        width = int.from_bytes(data[16:20], "big")                    # the PNG's IHDR width: its CSS size
        display(Image(data=data, width=width, metadata={
            "alt": alt, "bl_file": path.relative_to(self.path).as_posix(),
            "bl_legend_over_data": counts["legend_over_data"], "bl_clipped": counts["clipped_markers"]}))

    def _save_figure(self, fig, name: str, dpi: int) -> Path:
        # called by figure(): stacklevel=3 points a figure-check warning at its caller
        from ..plots.figure_check import FigureCheckError, check_figure

        problems = check_figure(fig)
        if problems:
            msg = f"figure {name}: " + "; ".join(problems)
            if os.environ.get("BIASLAB_STRICT_FIGURES") == "1":
                raise FigureCheckError(msg)
            warnings.warn(msg, stacklevel=3)
            self.note(msg)
        p = self.figures / f"{name}.png"
        atomic_write(p, lambda tmp: fig.savefig(tmp, dpi=dpi, bbox_inches="tight"), suffix=".png")
        return p

    def record_model(self, fingerprint: dict) -> None:
        """Record a loaded model's fingerprint under its name. Recording the same model at the same precision again
        updates its entry (a served model's fingerprint after its probe); the same weights loaded at another
        precision (notebook 6: float32, and float32 on weights rounded to bfloat16) add that precision to the entry's
        ``dtypes`` (every precision loaded, in order; ``dtype`` stays the first load's), so no load overwrites
        another. Other weights under a known name are recorded as ``"<name> (<dtype>)"``."""
        def precision(fp: dict):     # the dtype, and the dtype the weights were rounded to (models.load)
            r = fp.get("weights_rounded_to")
            return f"{fp.get('dtype')} (weights rounded to {r})" if r else fp.get("dtype")

        models = self.provenance["models"]
        name = fingerprint.get("name", str(len(models)))
        prev = models.get(name)
        if prev is None or precision(prev) == precision(fingerprint):
            models[name] = {**(prev or {}), **fingerprint}
        elif prev.get("weights_sha256") == fingerprint.get("weights_sha256"):
            prev["dtypes"] = list(dict.fromkeys((prev.get("dtypes") or [precision(prev)])
                                                + [precision(fingerprint)]))
        else:
            models[f"{name} ({precision(fingerprint)})"] = fingerprint
        self._save()

    def record_data(self, hashes: dict[str, str]) -> None:
        self.provenance["data"].update(hashes)
        self._save()

    def note(self, text: str) -> None:
        self.provenance["notes"].append(text)
        self._save()

    def _save(self) -> None:
        atomic_write_text(self._prov_file, redact(json.dumps(self.provenance, indent=2, default=str)))


WATERMARK_PACKAGES = ("biaslab", "torch", "transformers", "numpy", "pandas", "scipy", "statsmodels", "pingouin",
                      "bambi", "pymc", "arviz", "matplotlib", "seaborn", "papermill")


def package_versions(names=WATERMARK_PACKAGES) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = "not installed"
    return out


def watermark() -> str:
    """Versions line for the last cell of every notebook (pymc-examples style)."""
    import platform
    vers = package_versions()
    return f"Python {platform.python_version()} on {platform.machine()}; " + ", ".join(f"{k} {v}" for k, v in vers.items())
