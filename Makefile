# The two commands: `make run` (embedded or real services) and `make test` (real services).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

# Tests run against the real local services; every URL can be overridden from the environment.
TEST_ENV := \
	DATABASE_URL=$${TEST_DATABASE_URL:-postgres://root@127.0.0.1:5432/tasks} \
	CELERY_BROKER_URL=$${TEST_BROKER_URL:-amqp://guest:guest@127.0.0.1:5672//} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/1} \
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-secret-not-for-production} \
	DJANGO_SECURE_SSL=0

.PHONY: install run test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

run: install
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py ensure_admin
	@echo "Admin: http://127.0.0.1:$(PORT)/admin/   (Ctrl-C stops web, worker and beat)"
	PATH=$(abspath $(VENV))/bin:$$PATH exec $(VENV)/bin/honcho -f Procfile start -p $(PORT) web worker beat

test: install
	$(TEST_ENV) $(PY) manage.py collectstatic --noinput -v0
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(TEST_ENV) $(VENV)/bin/mypy

bench: install
	$(TEST_ENV) $(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf var staticfiles .pytest_cache
