"""What a reader sees, in two layers. What a notebook writes and shows through, which papers may import: :mod:`.outputs`
(tables, figures and provenance into a run folder), :mod:`.display` (how they are shown) and :mod:`.wording` (the shared
phrases of computed findings; it imports nothing). The pages over executed notebooks, which may import papers and the
plan: :mod:`.html` (a notebook as an offline report, opened by :mod:`.decision_panel`; checked and
photographed by :mod:`.browser` and :mod:`.gallery`), :mod:`.front_page` (``outputs/index.html``), :mod:`.headline`
(``outputs/SUMMARY.md`` and the generated blocks of the README and docs/) and :mod:`.catalogue`
(``outputs/CATALOGUE.md``). This file imports none of them: loading :mod:`.outputs` must not load the pages.
"""
