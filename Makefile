# The course's commands. Everything runs from the project's own .venv/, made on first use.
#   make lab        start JupyterLab on notebooks/ (127.0.0.1, with a token)
#   make test       ruff, the unit tests, and strict nbval on every notebook
#   make notebooks  re-execute every notebook in place on a fresh kernel (Restart & Run All)
#   make bench      speed figures against their targets (prints; saves .bench/bench.json)
#   make student    a copy of the notebooks without the exercise solutions, in student/

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NOTEBOOKS ?= notebooks
PORT ?= 8888
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: setup lab test lint unit nbval notebooks bench student clean

setup: $(STAMP)

# Re-installs only when a pin changes. The constraints file keeps every step on the CPU build
# of torch==2.13.0: a bare `torch` or a range would pull a CUDA build of several GB.
$(STAMP): requirements.txt requirements-test.txt requirements-nodeps.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -r requirements-test.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

lab: setup
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) --allow-root \
		--ServerApp.root_dir=$(NOTEBOOKS) --LabApp.news_url=None

test: lint unit nbval

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: setup
	$(BIN)/python -m pytest tests

# pytest exits 5 when it collects nothing, so an empty notebooks/ fails here too.
nbval: setup
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS)

notebooks: setup
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.store_widget_state=False \
		$(NOTEBOOKS)/*.ipynb
	$(BIN)/python -m tests.strip_widget_state $(NOTEBOOKS)/*.ipynb

# a benchmark, not a test: it never fails on a time
bench: setup
	$(BIN)/python -m tests.bench.run_bench

student: setup
	$(BIN)/python -m tests.student.build student

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
