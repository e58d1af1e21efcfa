# HomeAgent developer entry points. Each target bootstraps .venv itself.
PYTHON ?= python3
VENV   ?= .venv
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

.PHONY: run test screenshots screenshots-phone bench lint typecheck clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml hatch_build.py homeagent_core/memory/documents/_native.c | $(PY)
	$(PIP) install --quiet $(CONSTRAINTS) -e .
	touch $@

# First-party plugin distributions (plugins/*): installed with the dev tools, tested by `make test`.
PLUGINS := plugins/homeagent-plugin-onebot plugins/homeagent-plugin-telegram

$(VENV)/.installed-dev: pyproject.toml hatch_build.py homeagent_core/memory/documents/_native.c constraints-cpu.txt $(addsuffix /pyproject.toml,$(PLUGINS)) | $(PY)
	$(PIP) install --quiet $(CONSTRAINTS) -e ".[dev,multimodal]" $(addprefix -e ,$(PLUGINS))
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	@echo "homeagent is installed in $(VENV)/bin: in another shell, 'source $(VENV)/bin/activate' puts it on the PATH"
	$(VENV)/bin/homeagent serve $(if $(DATA),--data $(DATA))

test: $(VENV)/.installed-dev
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
