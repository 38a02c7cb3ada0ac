"""The run machinery. ``biaslab reproduce`` (:mod:`.execute`) runs the notebooks headless at a profile's sizes
(:mod:`.profiles`) after checking their parameters (:mod:`.parameters`) and settings (:mod:`.preflight`), stops on a
signal (:mod:`.stopping`), publishes a folder under its lock (:mod:`.publish`) and compares a regenerated run with
the committed one (:mod:`.regenerated`); ``biaslab import`` makes a run folder of another harness's log
(:mod:`.log_import`); ``biaslab check-benchmark`` dry-runs a benchmark's hooks (:mod:`.check_benchmark`). The last
stage before :mod:`biaslab.cli`: it may import every other stage, no stage imports it, and this file imports nothing.
"""
