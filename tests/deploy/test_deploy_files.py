"""docker-compose.yml and the Dockerfile describe the system the README promises."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_every_process_and_service_is_there_with_its_port() -> None:
    services = compose()["services"]
    assert set(services) == {
        "postgres",
        "rabbitmq",
        "redis",
        "release",
        "web",
        "worker",
        "beat",
        "flower",
    }
    ports = {
        name: [p.split(":")[-1] for p in svc.get("ports", [])] for name, svc in services.items()
    }
    assert ports["web"] == ["8000"] and ports["flower"] == ["5555"]
    assert "15672" in ports["rabbitmq"] and "management" in services["rabbitmq"]["image"]
    app = [s for s in ("release", "web", "worker", "beat", "flower")]
    assert {services[s]["image"] for s in app} == {"scheduled-tasks:latest"}  # one image
    assert all(services[s]["build"] == "." for s in app)
    for name in ("web", "worker", "beat", "flower"):  # nothing starts before the migration
        assert (
            services[name]["depends_on"]["release"]["condition"] == "service_completed_successfully"
        )
    assert "migrate" in " ".join(services["release"]["command"])
    assert services["beat"]["command"][:4] == ["celery", "-A", "project", "beat"]
    env = services["web"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
    assert (
        env["CELERY_BROKER_URL"].startswith("amqp://") and "@rabbitmq:" in env["CELERY_BROKER_URL"]
    )
    assert env["REDIS_URL"].startswith("redis://redis:")


def test_compose_needs_a_secret_key_and_keeps_flower_private() -> None:
    services = compose()["services"]
    # ${VAR:?message}: compose refuses to start without it; no known key to fall back on.
    for name in ("release", "web", "worker", "beat", "flower"):
        assert services[name]["environment"]["DJANGO_SECRET_KEY"].startswith(
            "${DJANGO_SECRET_KEY:?"
        )
    flower = services["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")
    assert flower["environment"]["FLOWER_UNAUTHENTICATED_API"] == "false"
    assert flower["ports"] == ["127.0.0.1:5555:5555"]
    published = [p for svc in services.values() for p in svc.get("ports", [])]
    assert [p for p in published if not p.startswith("127.0.0.1:")] == ["8000:8000"]


def test_dockerfile_builds_one_image_that_runs_as_a_user() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11" in text
    assert "collectstatic" in text and "USER app" in text and "flower" in text


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_config_accepts_the_file() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed")

    def config(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, "-f", str(COMPOSE), "config", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **env},
        )

    out = config(DJANGO_SECRET_KEY="k" * 50, FLOWER_BASIC_AUTH="admin:pw-5d1c")
    assert out.returncode == 0, out.stderr
    no_key = config(FLOWER_BASIC_AUTH="admin:pw-5d1c")
    assert no_key.returncode != 0 and "DJANGO_SECRET_KEY" in no_key.stderr
    no_flower_password = config(DJANGO_SECRET_KEY="k" * 50)
    assert no_flower_password.returncode != 0 and "FLOWER_BASIC_AUTH" in no_flower_password.stderr
