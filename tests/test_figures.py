"""Figures a reviewer would accept: the check every saved figure passes through, and the figures the newcomer's
pass found wanting, drawn from fabricated tables of the degenerate cases (one model, separated model, nothing
significant, discarded templates without a score)."""

from __future__ import annotations

import base64
import re
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from biaslab import plots  # noqa: E402
from biaslab.report.outputs import OutputDir  # noqa: E402
from biaslab.papers.calm import plots as calm_plots  # noqa: E402
from biaslab.plots import bayes as bplots, entropy as eplots  # noqa: E402
from biaslab.plots.figure_check import FigureCheckError, check_figure  # noqa: E402
from biaslab.plots.labels import hdi_prob, interval_label  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


# ------------------------------------------------------------------------------------------- the check

def test_check_flags_empty_axes_and_broken_promises():
    fig, ax = plt.subplots()
    ax.axhline(0.5)                                   # a reference line alone is not data
    ax.set_title("rates (grey: discarded)")
    problems = check_figure(fig)
    assert any("shows no data" in p for p in problems) and any("no legend" in p for p in problems)

    fig, ax = plt.subplots()
    ax.bar([0, 1], [0.0, 0.0])                        # bars of height 0 draw nothing
    assert any("shows no data" in p for p in check_figure(fig))

    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], label="a")
    ax.set_title("*: significant")
    assert check_figure(fig) == ["the title explains '*' marks but none is drawn"]
    ax.text(1, 2, "*")
    assert check_figure(fig) == []


def test_check_accepts_a_message_and_a_legend():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "no finite estimate", transform=ax.transAxes)
    assert check_figure(fig) == []
    fig, ax = plt.subplots()
    ax.scatter([1, 2], [1, 2], color="grey", label="left out")
    ax.set_title("grey: left out")
    ax.legend()
    assert check_figure(fig) == []


def test_output_dir_checks_every_saved_figure(tmp_path, monkeypatch):
    out = OutputDir(tmp_path)
    fig, ax = plt.subplots()
    ax.axhline(0.5)
    with pytest.warns(UserWarning, match="shows no data"):
        out.figure(fig, "empty")
    assert "figure empty" in out.provenance["notes"][0]
    monkeypatch.setenv("BIASLAB_STRICT_FIGURES", "1")
    with pytest.raises(FigureCheckError):
        out.figure(fig, "empty_strict")
    assert not (tmp_path / "figures" / "empty_strict.png").exists()


def test_output_dir_figure_saves_twice_the_shown_resolution_and_shows_a_lighter_copy_with_alt_text(tmp_path,
                                                                                                     monkeypatch):
    import biaslab.report.outputs
    import IPython.display
    import nbformat

    from biaslab.report.html import print_resolution

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    out = OutputDir(tmp_path)
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([0, 1], [0, 1], label="line")
    a.legend()
    a.set(title="rates", xlabel="share of prompts", ylabel="$\\hat p$")
    b.bar([0, 1], [1, 2])
    fig.suptitle("Two panels")
    assert out.figure(fig, "line") is None                     # None: a call ending a cell adds no Out[]
    saved = (tmp_path / "figures" / "line.png").read_bytes()
    assert not plt.fignum_exists(fig.number)                   # a plt.show() after it shows nothing more
    (image,) = shown
    width = int.from_bytes(image.data[16:20], "big")
    # the notebook embeds a copy at the shown resolution, at its natural (CSS) width; the file has twice the pixels
    assert isinstance(image, IPython.display.Image) and image.data != saved and image.width == width
    assert biaslab.report.outputs.FIGURE_DPI == 2 * biaslab.report.outputs.SHOWN_DPI
    assert abs(int.from_bytes(saved[16:20], "big") / width - 2) < 0.02, (width, int.from_bytes(saved[16:20], "big"))
    meta = image._repr_png_()[1]
    assert meta["alt"] == "Two panels. panel 1: rates; x: share of prompts; y: p; y from 0 to 1. panel 2: y from 1 to 2"
    # the HTML report swaps the copy for the saved file (named in the metadata), at the same CSS width
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": image._repr_png_()[0]}, metadata={"image/png": meta})])])
    assert meta["bl_file"] == "figures/line.png" and print_resolution(nb, tmp_path) == 1
    out_ = nb.cells[0].outputs[0]
    assert out_.data["image/png"] == base64.b64encode(saved).decode() and out_.metadata["image/png"]["width"] == width


def test_figure_check_warnings_point_at_the_caller(tmp_path, monkeypatch):
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: None)
    out = OutputDir(tmp_path)
    fig, ax = plt.subplots()
    ax.axhline(0.5)
    with pytest.warns(UserWarning, match="shows no data") as record:
        out.figure(fig, "empty")
    assert record[0].filename == __file__


def test_interval_labels():
    assert interval_label() == "95 % CI" and interval_label("HDI", 0.9) == "90 % HDI"
    assert interval_label("CI", 0.95, "Wald") == "95 % CI (Wald)"
    assert hdi_prob("hdi_2.5%", "hdi_97.5%") == 0.95 and hdi_prob("hdi_3%", "hdi_97%") == 0.94


# ----------------------------------------------------------------------------------------- the figures

def test_position_bias_one_model_all_zero_is_visible():
    t = pd.DataFrame({"model": "m", "dataset": ["en", "en", "fr", "fr"],
                      "order": ["more_first", "less_first"] * 2, "p_first": 0.0})
    fig = bplots.position_bias(t)
    assert check_figure(fig) == []
    assert "1 model prompted: m" in fig.axes[0].get_title()
    assert len([line for line in fig.axes[0].lines if line.get_marker() not in ("None", "")]) == 2


def test_coefficient_plot_says_when_the_model_is_separated():
    t = pd.DataFrame({"term": ["Intercept", "gender[female]", "biased_answer[yes]"],
                      "factor": ["Intercept", "gender", "biased_answer"], "level": ["", "female", "yes"],
                      "coef": [-25, 0, 51], "ci_low": [0, 0, 0], "ci_high": [np.inf] * 3, "p_value": [1, 1, 1],
                      "rate_level": [0.4, 0.3, 1.0], "separated": True})
    fig = plots.coefficient_plot(t, 1.0, "m", references={"gender": "gender neutral", "biased_answer": "no"})
    assert check_figure(fig) == []
    text = " ".join(x.get_text() for x in fig.axes[0].texts).replace("\n", " ")
    assert "all 2 terms are separated" in text and "biased_answer = yes: rate 1.00" in text
    assert "reference levels: gender = gender neutral; biased_answer = no" in fig.axes[0].get_xlabel()


def test_coefficient_plot_names_reference_levels_and_dropped_terms():
    t = pd.DataFrame({"term": ["Intercept", "gender[female]", "gender[male]"],
                      "factor": ["Intercept", "gender", "gender"],
                      "level": ["", "female", "male"], "coef": [-1, 0.5, 30], "ci_low": [0.2, 1.1, 0],
                      "ci_high": [0.5, 2.5, np.inf], "p_value": [0.01, 0.001, 1.0], "rate_level": [0.3, 0.5, 1.0],
                      "separated": [False, False, True]})
    fig = plots.coefficient_plot(t, 0.05, "m", references={"gender": "gender neutral"})
    assert check_figure(fig) == []
    xl = fig.axes[0].get_xlabel()
    assert "95 % CI (Wald)" in xl and "gender = gender neutral" in xl and "not drawn: 1 separated term" in xl


def test_template_bias_draws_left_out_templates_and_a_legend():
    t = pd.DataFrame({"model": "m", "task": ["qa", "qa", "nli", "sentiment"], "bias_type": ["gender", "race"] * 2,
                      "bias_paper": [50.0, np.nan, 700.0, 20.0], "used": [True, False, False, True]})
    fig = calm_plots.template_bias(t, "bias_paper", "Per-template bias (grey: discarded)")
    assert check_figure(fig) == []
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "left out by a discard rule" in labels and "left out, no score (zero baseline)" in labels


def _gp(q):
    return pd.DataFrame({"model": "m", "class_type": "gender", "group": ["Female", "Male"], "uniform": 0.5,
                         "mean_p_positive": [0.6, 0.4], "mean_p_negative": [0.4, 0.6], "bh_q": q})


def test_group_preference_marks_only_what_it_promises():
    none = eplots.group_preference(_gp([0.5, 0.6]))
    assert check_figure(none) == [] and "none marked" in none._suptitle.get_text()
    some = eplots.group_preference(_gp([0.01, 0.6]))
    assert check_figure(some) == [] and "(1 marked)" in some._suptitle.get_text()


def test_cyclic_comparison_zooms_on_the_data():
    cyc = pd.DataFrame({"model": "m", "prompt_id": ["a", "b", "c"], "entropy_stored": [0.93, 0.95, 0.97],
                        "entropy_cyclic_avg": [0.998, 0.999, 0.997]})
    fig = eplots.cyclic_comparison(cyc)
    assert check_figure(fig) == []
    lo, hi = fig.axes[0].get_xlim()
    assert 0.9 < lo < 0.93 and 1.0 < hi < 1.01


def test_check_accepts_seaborn_boxes_of_single_points():
    """One pair per bias type (a smoke run) draws zero-height boxes with median lines: data, not an empty axes."""
    pairs = pd.DataFrame({"dataset": "x", "bias_type": ["age", "disability"], "model": "m",
                          "d_norm_logprob": [0.1, -0.2]})
    assert check_figure(bplots.d_distributions(pairs)) == []


def test_bf_prior_robustness_marks_the_reported_prior():
    """BF10 against the prior scale per model x dataset, log axes, the reported prior marked on each
    line, the stated range shaded; built from stats.hypothesis.bf_prior_curves (pooled rows)."""
    from biaslab.plots import bayes as bplots
    from biaslab.stats import hypothesis as h
    rng = np.random.default_rng(0)
    pairs = pd.DataFrame({"model": "m", "dataset": np.repeat(["en", "fr"], 60), "bias_type": "race",
                          "d_norm_logprob": rng.normal(0.1, 1, 120), "d_perplexity": rng.normal(0, 1, 120),
                          "d_logprob": rng.normal(0, 1, 120)})
    lik = h.likelihood_tests(pairs, by=("model", "dataset"))
    prefs = pd.DataFrame({"model": "m", "dataset": "en", "source": "likelihood", "bias_type": "race",
                          "x": (rng.random(80) < 0.6).astype(float)})
    pref = h.preference_tests(prefs)
    curves = h.bf_prior_curves(lik, pref)
    row = lik[(lik.bias_type == h.OVERALL) & (lik.score == "norm_logprob") & (lik.dataset == "en")].iloc[0]
    at = curves[(curves.label == "m · en") & np.isclose(curves.prior_value, h.SQRT2_2)]
    assert at["bf10"].iloc[0] == pytest.approx(row["bf10"])
    fig = bplots.bf_prior_robustness(curves, stated={"likelihood (LPBS, JZS)": (0.2, 1.0)})
    assert check_figure(fig) == []
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and "prior" in ax.get_xlabel()
    assert any("reported prior" in t.get_text() for t in ax.get_legend().get_texts())
    # legend text at least 12 CSS px once the figure is scaled to the report's column
    from biaslab.report.outputs import SHOWN_DPI
    from helpers import REPORT_COLUMN_PX
    width = fig.get_tightbbox(fig.canvas.get_renderer()).width * SHOWN_DPI
    legend_pt = min(t.get_fontsize() for a in fig.axes for t in a.get_legend().get_texts())
    assert legend_pt * SHOWN_DPI / 72 * min(1.0, REPORT_COLUMN_PX / width) >= 12
    plt.close(fig)


def test_sunburst_and_forest_plot_labels_are_9_pt_in_the_report():
    """Their smallest text, saved at 110 dpi and shown at its size (or scaled to the report's column), is at least
    12 CSS px (9 pt)."""
    from biaslab.report.outputs import SHOWN_DPI
    from biaslab.plots.compare import forest_plot
    from helpers import smallest_text_px

    rows = []
    for g in ("female", "male", "non-binary"):
        rows.append({"level": 1, "factors": "gender", "gender": g, "n": 100, "log_disparity": 0.1})
        for r in ("white", "black", "asian"):
            rows.append({"level": 2, "factors": "gender x race", "gender": g, "race": r, "n": 30,
                         "log_disparity": -0.2})
    sun = plots.sunburst(pd.DataFrame(rows), "gender", "race", title="m: log disparity")
    forest = forest_plot(pd.DataFrame({"model": ["a", "b", "c"], "estimate": [0.1, 0.3, 0.2],
                                       "ci_low": [0.0, 0.2, np.nan], "ci_high": [0.2, 0.4, np.nan],
                                       "orientation": 1, "metric": "bias", "direction": "higher: more bias",
                                       "null": 0.0, "label": "bias score"}))
    for fig in (sun, forest):
        assert smallest_text_px(fig, SHOWN_DPI) >= 12, smallest_text_px(fig, SHOWN_DPI)
    fig, ax = plt.subplots(figsize=(20, 3))          # the measure itself: a wide figure shrinks in the column
    ax.plot([0, 1], [0, 1])
    ax.set_title("t", fontsize=10)
    assert smallest_text_px(fig, SHOWN_DPI) < 10 * 110 / 72 * 0.6       # 15 px at its size, about 9 px shown


def test_layout_counts_find_a_legend_over_data_and_a_cut_marker():
    from biaslab.plots.figure_check import layout_counts

    fig, ax = plt.subplots()
    ax.plot(np.linspace(0, 1, 50), np.full(50, 0.95), "o", label="dots")    # a row of markers under the legend
    ax.plot([0.0], [0.5], "s", label="at the edge")                          # half of it outside the axes
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left")
    counts = layout_counts(fig)
    assert counts["legend_over_data"] > 0 and counts["clipped_markers"] > 0
    assert any("legend covers" in p for p in check_figure(fig)) and any("cut at" in p for p in check_figure(fig))
    ax.set(xlim=(-0.1, 1.1), ylim=(0, 2))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))                # outside the axes
    assert layout_counts(fig) == {"legend_over_data": 0, "clipped_markers": 0}
    plt.close(fig)


def test_specification_curve_keeps_its_legend_off_the_data_and_states_its_result():
    from biaslab.report.display import figure_alt
    from biaslab.plots.figure_check import layout_counts
    from biaslab.plots.specification import specification_curve

    rng = np.random.default_rng(0)
    rows = [{"model": m, "universe": u, "estimate": e, "ci_low": e - 0.1, "ci_high": e + 0.1,
             "responder_status": "degenerate" if u == "format=x" else "ok"}
            for m in ("a", "b") for u, e in zip(["paper", "format=x", "wording=y", "chat=off", "shots=1"],
                                                rng.normal(0.3, 0.2, 5))]
    fig = specification_curve(pd.DataFrame(rows), "title", null=0.0, unit="bias score")
    assert layout_counts(fig)["legend_over_data"] == 0
    alt = figure_alt(fig)
    assert alt.startswith("a: bias score from ") and "across 5 universes, the paper's protocol" in alt
    assert re.search(r"\d\.\d", alt)
    plt.close(fig)


def test_sunburst_alt_text_states_the_largest_disparity_and_its_subgroup():
    """The sunburst's alt text named only its title and colour bar (notebook 1's reports, 10 figures)."""
    from biaslab.report.display import figure_alt

    rows = []
    for g, d in (("female", 0.3), ("male", -0.5), ("non-binary", np.nan)):
        rows.append({"level": 1, "factors": "gender", "gender": g, "n": 100, "log_disparity": d})
        for r, e in (("white", -0.1), ("black", 0.8 if g == "female" else 0.2), ("asian", 0.0)):
            rows.append({"level": 2, "factors": "gender x race", "gender": g, "race": r, "n": 30, "log_disparity": e})
    fig = plots.sunburst(pd.DataFrame(rows), "gender", "race", title="m: log disparity")
    alt = figure_alt(fig)
    assert alt.startswith("largest log disparity of gender: male -0.5 (advantaged, 100 responses); largest log "
                          "disparity of gender x race: female x black +0.8 (disadvantaged, 30 responses). panel 1: m: log "
                          "disparity"), alt
    plt.close(fig)


def test_forest_plot_alt_text_states_each_model_s_estimate_against_the_null():
    from biaslab.report.display import figure_alt
    from biaslab.plots.compare import forest_plot

    fig = forest_plot(pd.DataFrame({"model": ["smollm2", "gemma"], "estimate": [0.6, 0.45], "ci_low": [0.55, 0.3],
                                    "ci_high": [0.65, 0.6], "orientation": 1, "metric": "stereotype share",
                                    "direction": "higher: more bias", "null": 0.5, "label": "$BF_{10}$ share"}))
    alt = figure_alt(fig)
    assert alt.startswith("smollm2's stereotype share is 0.6 [0.55, 0.65], above 0.5; gemma's stereotype share is "
                          "0.45 [0.3, 0.6], includes 0.5."), alt
    assert "BF10 share" in alt and "$" not in alt and "_{" not in alt          # plain words
    plt.close(fig)


def test_position_bias_draws_every_marker_and_interval_end_inside_its_axes():
    from biaslab.plots.figure_check import layout_counts

    pb = pd.DataFrame({"model": "m", "k": 3, "position": [1, 2, 3], "mean_p": [0.0, 0.5, 1.0],
                       "ci95_low": [-0.3, 0.4, 0.9], "ci95_high": [0.2, 0.6, 1.1]})
    fig = eplots.position_bias(pb)
    assert layout_counts(fig) == {"legend_over_data": 0, "clipped_markers": 0}
    plt.close(fig)
