# The course's commands, for those who have make. Each calls `python -m course`, which does
# the same on Windows, macOS and Linux without make (see its docstring, or the README).
#   make lab        install the course in .venv/ (first time), start JupyterLab on my-notebooks/
#                   (a working copy of notebooks/; SERVE=notebooks serves notebooks/ itself)
#   make test       ruff, the unit tests, and strict nbval on every notebook
#   make notebooks  re-execute every notebook in place on a fresh kernel (Restart & Run All)
#   make bench      speed figures against their targets (prints; saves .bench/bench.json)
#   make student    a copy of the notebooks without the exercise solutions, in student/
#   make site       the course as a static site in site/ (BINDER=owner/repo for Binder links,
#                   SOLUTIONS=no to leave the exercises' solutions out)
#   make report SUBMISSIONS=folder   (teachers) grade submitted notebooks into report/
#                   (PSEUDONYMISE=1: stable pseudonyms in place of names; OUT=dir: elsewhere;
#                   EXERCISES=01,03: the exercises set, else those half the class handed in)

PYTHON ?= python3
COURSE := $(PYTHON) -m course
PORT ?= 8888
CULL_IDLE ?= 1200
NOTEBOOKS ?= notebooks
SERVE ?=
export PORT CULL_IDLE NOTEBOOKS

SUBMISSIONS ?=
OUT ?= report
PSEUDONYMISE ?=
EXERCISES ?=

.PHONY: setup lab test lint unit nbval notebooks bench student site report clean

setup:
	$(COURSE) setup

lab:
	$(COURSE) lab $(if $(SERVE),--serve $(SERVE))

test:
	$(COURSE) test

lint unit nbval:
	$(COURSE) test --only $@

notebooks:
	$(COURSE) notebooks

bench:
	$(COURSE) bench

student:
	$(COURSE) student

site:
	$(COURSE) site $(if $(BINDER),--binder $(BINDER)) $(if $(filter no No NO 0 false off,$(SOLUTIONS)),--no-solutions)

report:
	@test -n "$(SUBMISSIONS)" || { echo "usage: make report SUBMISSIONS=folder [OUT=report] [PSEUDONYMISE=1]"; exit 2; }
	$(COURSE) report "$(SUBMISSIONS)" --out "$(OUT)" $(if $(PSEUDONYMISE),--pseudonymise) $(if $(EXERCISES),--exercises "$(EXERCISES)")

clean:
	rm -rf .venv .pytest_cache .ruff_cache .hypothesis *.egg-info
