# The two commands: `make run` (the embedded stack, or the services the environment names)
# and `make test` (real services). `make help` lists the rest.
SHELL := /bin/bash
# The interpreter .venv is built with. Supported: 3.11, 3.12, 3.13 (pyproject.toml).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
SUPPORTED_PYTHONS := 3.11 3.12 3.13
EXTRAS ?= dev,demo,embedded
# A Django pin installed with the project (a pip requirement; unset: the newest pyproject.toml
# admits for the interpreter, 5.2 on Python 3.11):
# make test VENV=.venv-3.12 PYTHON=python3.12 DJANGO='Django>=6.0,<6.1'
DJANGO ?=

python_version = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV_PYTHON := $(call python_version,$(PY))
HASH := $(shell cat pyproject.toml | sha1sum | cut -c1-12)
DJANGO_TAG := $(if $(DJANGO),-$(shell printf '%s' '$(DJANGO)' | sha1sum | cut -c1-8))
STAMP := $(VENV)/.installed-$(HASH)-$(EXTRAS)$(DJANGO_TAG)-py$(VENV_PYTHON)

# .venv is rebuilt when its interpreter is missing, broken or unsupported, or (PYTHON given on
# the command line or in the environment) is not the one asked for.
ifeq ($(filter $(VENV_PYTHON),$(SUPPORTED_PYTHONS)),)
  REBUILD := $(if $(VENV_PYTHON),has Python $(VENV_PYTHON) (unsupported),is missing or broken)
else ifneq ($(origin PYTHON),file)
  ifneq ($(VENV_PYTHON),$(call python_version,$(PYTHON)))
    REBUILD := has Python $(VENV_PYTHON), not $(PYTHON)'s
  endif
endif
ifneq ($(REBUILD),)
  .PHONY: $(STAMP)
endif

# Tests run against the real local services; every URL can be overridden from the environment.
TEST_ENV := \
	DATABASE_URL=$${TEST_DATABASE_URL:-postgres://root@127.0.0.1:5432/tasks} \
	CELERY_BROKER_URL=$${TEST_BROKER_URL:-amqp://guest:guest@127.0.0.1:5672//} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/1} \
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-secret-not-for-production} \
	DJANGO_SECURE_SSL=0

.PHONY: install run manage test lint bench soak clean clean-all help

install: $(STAMP)

$(STAMP): pyproject.toml
	@if [ -n "$(REBUILD)" ]; then \
	  wanted=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	  case " $(SUPPORTED_PYTHONS) " in *" $$wanted "*) ;; \
	    *) echo "PYTHON=$(PYTHON) is '$${wanted:-not runnable}'; supported: $(SUPPORTED_PYTHONS)" >&2; exit 1;; esac; \
	  echo "$(VENV) $(REBUILD): rebuilding it with $(PYTHON) ($$wanted)"; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); \
	fi
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]' $(if $(DJANGO),'$(DJANGO)')
	rm -f $(VENV)/.installed-*
	touch $(VENV)/.installed-$(HASH)-$(EXTRAS)$(DJANGO_TAG)-py$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# Embedded Postgres (var/postgres) unless DATABASE_URL is set; see project/embedded.py.
run: install
	PORT=$(PORT) $(PY) -m project.embedded run

# One manage.py command on the same stack (manage.py finds it): make manage ARGS="tasks list".
# Only the command's output is printed (the recipe is not echoed). make reports any failure
# as its own exit status 2, after a line naming the command's ("make: *** [...] Error 1"); a
# script that tells 1 from 2 runs python manage.py (docs/cli.md).
manage: install
	@$(PY) manage.py $(ARGS)

test: install
	$(TEST_ENV) $(PY) manage.py collectstatic --noinput -v0
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(TEST_ENV) $(VENV)/bin/mypy

bench: install
	$(TEST_ENV) $(PY) -m bench $(BENCH_ARGS)

# The fault soak (docs/reliability.md): SOAK_MINUTES (30), SOAK_SEED (printed; replays a run).
soak: install
	$(TEST_ENV) $(PY) -m tests.soak

VAR := $(or $(TASKS_VAR_DIR),var)
GENERATED := $(VAR) staticfiles .pytest_cache .mypy_cache .ruff_cache .hypothesis

clean:
	@pid=$$(head -1 $(VAR)/postgres/postmaster.pid 2>/dev/null); \
	if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then \
	  echo "the embedded Postgres (pid $$pid) is running: stop make run first" >&2; exit 1; fi
	@echo "Removing $(VAR)/ (embedded Postgres data, cache, secret key, static files),"
	@echo "  staticfiles/ and the tool caches: $(filter-out $(VAR) staticfiles,$(GENERATED))"
	rm -rf $(GENERATED)
	@echo "Kept: $(wildcard $(VENV) .venv-3.*) (make clean-all removes the virtualenvs too)"

clean-all: clean
	@echo "Removing the virtualenvs: $(wildcard $(VENV) .venv-3.*)"
	rm -rf $(VENV) .venv-3.*

help:
	@echo "make run              web + worker + beat; embedded Postgres unless DATABASE_URL is set"
	@echo "make manage ARGS=...  one manage.py command on the same stack"
	@echo "make test             the suite on the real Postgres, RabbitMQ and Redis (PYTEST_ARGS=...)"
	@echo "make lint             ruff and mypy"
	@echo "make bench            benchmarks (BENCH_ARGS=...)"
	@echo "make soak             random faults under load, then the history checked (SOAK_MINUTES, SOAK_SEED)"
	@echo "make clean            remove var/, staticfiles/ and tool caches; clean-all: also .venv*"
	@echo "PYTHON=python3.12     build .venv with another interpreter ($(SUPPORTED_PYTHONS))"
	@echo "DJANGO='Django>=6.0,<6.1'  install that Django (6.0 needs Python >= 3.12)"

# The enqueue scenario's anchors (django-tasks-db, django-ox), each in a virtualenv of its own
# under $(VAR)/bench-anchors/ built from PyPI (bench/anchors/requirements-*.txt), never in
# pyproject.toml; `make bench BENCH_ARGS=enqueue` builds them on first use too.
.PHONY: bench-anchors
bench-anchors:
	TASKS_VAR_DIR=$(VAR) $(PYTHON) bench/anchors/venvs.py
