# One image for every process: web, worker, beat, the release (migrate) step and Flower.
#   docker build -t scheduled-tasks .
#   docker compose up           (see docker-compose.yml and docs/operations.md)
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_STATIC_ROOT=/app/staticfiles \
    TASKS_VAR_DIR=/app/var

WORKDIR /app

# Dependencies first, so a code change does not reinstall them: the app's and the demo
# project's (the `demo` extra); never the embedded Postgres of `make run` (`embedded`).
COPY pyproject.toml README.md ./
COPY tasks_app/__init__.py tasks_app/__init__.py
RUN pip install ".[demo]" "flower>=2.0,<3" && pip uninstall -y django-scheduled-runs

COPY . .
RUN pip install --no-deps . \
    && DJANGO_SECRET_KEY=build-only-not-secret DATABASE_URL=postgres://build@localhost/unused \
       python manage.py collectstatic --noinput -v0 \
    && useradd --system --uid 10001 --home-dir /app app \
    && mkdir -p /app/var && chown -R app /app/var

USER app
EXPOSE 8000
# The web process; docker-compose.yml gives worker, beat, release and flower their commands.
CMD ["gunicorn", "project.wsgi", "-c", "project/gunicorn.conf.py"]
