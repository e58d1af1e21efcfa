# HomeAgent developer entry points. Each target bootstraps .venv itself.
PYTHON ?= python3
VENV   ?= .venv
# Home Assistant for the homeassistant plugin's tests (see ha-venv below).
HA_VENV ?= .venv-ha
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# Empty: the one default every command uses too ($HOMEAGENT_HOME, else ~/.homeagent).
DATA   ?=
# A CPU build of torch; a bare `torch` resolves a multi-GB CUDA build.
CONSTRAINTS := -c constraints-cpu.txt
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_HUB_DISABLE_PROGRESS_BARS ?= 1
export TRANSFORMERS_VERBOSITY ?= error

.PHONY: run test screenshots screenshots-phone bench lint typecheck clean ha-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml hatch_build.py homeagent_core/memory/documents/_native.c | $(PY)
	$(PIP) install --quiet $(CONSTRAINTS) -e .
	touch $@

# First-party plugin distributions (plugins/*): installed with the dev tools, tested by `make test`.
PLUGINS := plugins/homeagent-plugin-onebot plugins/homeagent-plugin-telegram \
           plugins/homeagent-plugin-homeassistant plugins/homeagent-plugin-mqtt

$(VENV)/.installed-dev: pyproject.toml hatch_build.py homeagent_core/memory/documents/_native.c constraints-cpu.txt $(addsuffix /pyproject.toml,$(PLUGINS)) | $(PY)
	$(PIP) install --quiet $(CONSTRAINTS) -e ".[dev,multimodal]" $(addprefix -e ,$(PLUGINS))
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	@echo "homeagent is installed in $(VENV)/bin: in another shell, 'source $(VENV)/bin/activate' puts it on the PATH"
	$(VENV)/bin/homeagent serve $(if $(DATA),--data $(DATA))

test: $(VENV)/.installed-dev $(HA_VENV)/.installed
	$(PY) -m pytest -q

# Tests render their screenshots into a temporary folder; this renders docs/screenshots/ again
# (headless Chromium) for a change to the web UI's looks. Review them before committing.
screenshots: $(VENV)/.installed-dev
	HOMEAGENT_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest -q tests/core/builtin/webui/test_browser*.py

# Every page on a 390 px phone in Chinese and in English (docs/screenshots/phone-<page>-<zh|en>.png).
screenshots-phone: $(VENV)/.installed-dev
	$(PY) tools/phone_screenshots.py --out $(CURDIR)/docs/screenshots

bench: $(VENV)/.installed-dev
	$(PY) bench/run_all.py

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# Home Assistant for the homeassistant plugin's tests and bench/bench_home.py: a real `hass` in a
# venv of its own (its pins clash with ours; 2024.3 is the last release on Python 3.11). About
# 2.5 minutes and 600 MB the first time; kept between runs (CI caches .venv-ha by constraints-ha.txt).
# When it cannot be installed (no network, a wheel missing for this platform) the Home Assistant
# tests are skipped, saying so, and the rest of `make test` runs.
$(HA_VENV)/.installed: constraints-ha.txt
	@if $(PYTHON) -m venv $(HA_VENV) && $(HA_VENV)/bin/python -m pip install --quiet -r constraints-ha.txt; then \
		touch $@; \
	else \
		echo "Home Assistant could not be installed in $(HA_VENV); its tests will be skipped"; rm -rf $(HA_VENV); \
	fi

ha-venv: $(HA_VENV)/.installed

# open_clip needs torchvision; only the torch/torchvision pair in constraints-clip.txt runs on
# the CPU here, so its tests run in a venv of their own (about 6 GB, next to .venv).
CLIP_VENV ?= .venv-clip
.PHONY: test-clip
$(CLIP_VENV)/.installed: pyproject.toml constraints-clip.txt
	$(PYTHON) -m venv $(CLIP_VENV)
	$(CLIP_VENV)/bin/python -m pip install --quiet -c constraints-clip.txt -e ".[dev,multimodal,clip]"
	touch $@

test-clip: $(CLIP_VENV)/.installed
	$(CLIP_VENV)/bin/python -m pytest tests/core/embeddings -k clip -q
