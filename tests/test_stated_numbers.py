"""The front door states no timing by hand: every run time and speed in README.md and docs/*.md lies in a block that
`biaslab summary` renders from the file that holds it (each run's MANIFEST.json, perf/results/*/served.json), each
block equals what its source renders to now, and a page that types a timing outside a block fails here. The README is
a short front door that links every page under docs/."""

import json
import re

import pytest

from biaslab import paths
from biaslab.report import headline
from helpers import outside_blocks

ROOT = paths.ROOT
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

#: a duration or a speed: "28 min 25 s", "45 s", "2.5 minutes", "1.82x", "40.7 sentences/s"
TIMING = re.compile(r"\b\d[\d,.]*\s?(?:ms|s|secs?|seconds?|min|mins|minutes?|h|hours?)\b"
                    r"|\b\d[\d.]*[x×](?=[\s,;.)]|$)"
                    r"|\b\d[\d,.]*\s?(?:sentences|tokens|prompts|requests|items|pairs)/s\b", re.M)

#: pages the README links that another change adds; the test fails once one exists, so the entry is removed then
PENDING: set[str] = set()  # pages linked before they exist (none now)


def typed_timings(text: str) -> list[str]:
    return [m.group(0) for m in TIMING.finditer(outside_blocks(text))]


@pytest.mark.parametrize("page", PAGES)
def test_no_timing_is_typed_outside_a_generated_block(page):
    assert typed_timings((ROOT / page).read_text()) == [], \
        f"{page} states a timing by hand: render it from its results file in biaslab.report.headline.blocks()"


def test_the_timing_check_finds_a_typed_timing_and_skips_a_rendered_one():
    typed = ("`make reproduce` took 28 min 25 s from an empty cache and 2 min 39 s cached; the browser installs in "
             "about 45 s; biaslab is 2.04x lm-eval at 40.7 sentences/s, and 1.5 hours on a GPU.")
    assert typed_timings(typed) == ["28 min", "25 s", "2 min", "39 s", "45 s", "2.04x", "40.7 sentences/s",
                                    "1.5 hours"]
    begin, end = headline.TIMINGS
    assert typed_timings(f"intro\n{begin}\n{typed}\n{end}\ntail\n") == []
    # settings, versions, sizes and counts are not timings
    assert typed_timings("MathJax 2.7.9, Python 3.11, 3 MB, `timeout_s` (default 120), 2 model(s) × 3 "
                         "benchmark(s), 17 domains x 3 question types, 1e-4, vllm#3251") == []


def test_every_generated_block_equals_what_its_source_renders_to():
    """Each block of each page — headline results, multiverse, run times, served speed — is current."""
    for page in dict.fromkeys(b[0] for b in headline.blocks()):
        assert page in PAGES, f"{page} holds generated blocks but is not a page"
    assert headline.stale_pages() == [], "run `biaslab summary`"


def test_a_changed_wall_time_changes_the_rendered_timings(tmp_path):
    """The timings are read from their records: a whole run's wall time, or one notebook's in it, edited in a copy of
    perf/results/reproduce/ changes the README's line and docs/performance.md's table (so a stale number is caught by
    the test above)."""
    files = sorted((ROOT / "perf" / "results" / "reproduce").glob("*.json"))
    assert {p.stem for p in files} >= {"default_cold", "default_cached"}, "record both runs (perf/reproduce_timing.py)"
    for p in files:
        d = json.loads(p.read_text())
        assert headline._duration(d["wall_s"]) in headline.timings_line(records=p.parent)
        assert headline._duration(d["runs_wall_time_s"]["06_multiverse"]) in headline.timings_table(records=p.parent)
        d["wall_s"] += 3600
        d["runs_wall_time_s"]["06_multiverse"] += 7200
        rec = tmp_path / p.stem
        rec.mkdir()
        (rec / p.name).write_text(json.dumps(d))
        assert headline._duration(d["wall_s"]) in headline.timings_line(records=rec)
        assert headline._duration(d["runs_wall_time_s"]["06_multiverse"]) in headline.timings_table(records=rec)


def test_the_timings_table_states_a_shared_profile_and_status_once(tmp_path):
    for folder, status in (("02_calm", "ok"), ("03_crows_pairs_bayes", "ok")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "MANIFEST.json").write_text(json.dumps({"profile": "default", "status": status,
                                                                       "wall_time_s": 61, "git": {"commit": "ab"}}))
    assert headline.timings_table(tmp_path).startswith("*Every run: profile default, status ok.*")
    (tmp_path / "02_calm" / "MANIFEST.json").write_text(json.dumps({"profile": "smoke", "status": "failed"}))
    text = headline.timings_table(tmp_path)
    assert "Every run" not in text and "| `02_calm` (smoke, failed) |" in text
    assert "| `03_crows_pairs_bayes` (default, ok) |" in text


def test_duration_reads_as_minutes_and_seconds():
    assert headline._duration(1705.4) == "28 min 25 s" and headline._duration(59.6) == "1 min 00 s"
    assert headline._duration(45) == "45 s"


def test_the_readme_is_a_short_front_door_that_links_every_page():
    text = (ROOT / "README.md").read_text()
    # the headline block has one row per claim; every instance is in outputs/SUMMARY.md
    assert len(text.encode()) <= 10_000, f"README.md is {len(text.encode())} bytes; move detail to docs/"
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", text))
    assert {p for p in PAGES if p.startswith("docs/")} <= linked, "a page under docs/ is not linked from the README"
    assert not re.search(r"\bissue \d", "\n".join((ROOT / p).read_text() for p in PAGES)), "state the reason instead"


def test_the_readme_and_docs_fit_in_50_kb():
    """Each thing is said once, in one place: the README and the pages under docs/ together stay within 50 KB."""
    size = {p: len((ROOT / p).read_bytes()) for p in PAGES}
    assert sum(size.values()) <= 50_000, f"README.md + docs/ are {sum(size.values())} bytes (> 50,000): {size}"


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_point_at_files_that_exist(page):
    text = (ROOT / page).read_text()
    where = (ROOT / page).parent
    for target in re.findall(r"\]\((?![a-z]+:|#)([^)#\s]+)", text):
        rel = (where / target).resolve().relative_to(ROOT.resolve()).as_posix()
        if rel in PENDING:
            assert not (ROOT / rel).exists(), f"{rel} exists now: remove it from PENDING"
            continue
        assert (where / target).exists(), f"{page} links {target}, which does not exist"
