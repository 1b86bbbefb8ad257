"""A test-only Django app: actions whose side effect is a row keyed by run id, so fault tests
can count effects (lost? duplicated?). Loaded with ``TASKS_EXTRA_APPS=tests.effects``."""
