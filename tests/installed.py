"""A project laid out by docs/install.md, running the app from its wheel: the shape the suite's
real processes (end-to-end tests, the soak) and the benchmarks run in.

Built once per test session (or benchmark run): the wheel made from this checkout
(``python -m build``) is unpacked into a folder of its own (``pip install --no-deps
--target``), ahead of the checkout on the processes' ``sys.path``, so they import the app as
a team's project does, with this virtualenv's dependencies; ``django-admin startproject shop``
makes the project; each ``python`` block of docs/install.md is applied as its header says,
then the page's "settings from the environment" block (so a test's ``TASKS_*`` variables
reach the processes). The only lines not from the page are :data:`HARNESS`: the session's
test apps and queue, the cache key prefix the suite's own process uses, and ``DEBUG`` off,
as in any deployment.

tests/e2e/test_install.py runs the same page in a new virtualenv of its own, with pip
resolving the dependencies, as a reader does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.markdown import fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "install.md"
HEADER = re.compile(r"^# (\S+) — (add at the end|new file|the whole file)$")
NAME = "shop"
ENVIRONMENT_BLOCK = "an alternative"  # the page's "settings from the environment"
HARNESS = """
# --- Not from docs/install.md: the test session's own apps (test actions, effect rows), its
# queue, the cache key prefix its process reads with; DEBUG off, as in a deployment.
INSTALLED_APPS += [app for app in os.environ.get("TASKS_EXTRA_APPS", "").split(",") if app]
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("TASKS_DEFAULT_QUEUE", "celery")
CACHES["default"]["KEY_PREFIX"] = os.environ.get("CACHE_KEY_PREFIX", "tasks")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
"""


@dataclass(frozen=True)
class InstalledProject:
    root: Path  # where manage.py is; the Celery app is ``shop``
    site: Path  # the wheel's files

    def env(self, database_url: str, broker_url: str, redis_url: str) -> dict[str, str]:
        """The processes' environment: the project's own variables (docs/install.md's
        ``SHOP_*``) pointing at these services, the wheel ahead of the checkout."""
        db = urlsplit(database_url)
        return {
            "DJANGO_SETTINGS_MODULE": f"{NAME}.settings",
            "PYTHONPATH": os.pathsep.join([str(self.site), str(self.root), str(ROOT)]),
            "SHOP_DB_NAME": db.path.lstrip("/"),
            "SHOP_DB_USER": db.username or "",
            "SHOP_DB_PASSWORD": db.password or "",
            "SHOP_DB_HOST": db.hostname or "127.0.0.1",
            "SHOP_BROKER_URL": broker_url,
            "SHOP_REDIS_URL": redis_url,
        }


def build(dest: Path) -> InstalledProject:
    """The wheel and the project under ``dest`` (a new, empty folder)."""
    dist, site = dest / "dist", dest / "site"
    # setuptools copies the package into ROOT/build/lib and keeps what an earlier build left
    # there: a module since moved or deleted would ship in the wheel beside its successor.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], cwd=ROOT)
    (wheel,) = dist.glob("*.whl")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ]
    )
    run([sys.executable, "-m", "django", "startproject", NAME], cwd=dest)
    root = dest / NAME
    for block in fenced_blocks(DOC):
        if block.language != "python":
            continue
        first, _, body = block.text.partition("\n")
        header = HEADER.match(first)
        if block.not_run == ENVIRONMENT_BLOCK:
            _append(root / f"{NAME}/settings.py", body)
        elif header and block.not_run is None:
            path = root / header.group(1)
            if header.group(2) == "add at the end":
                _append(path, body)
            else:
                path.write_text(body)
    _append(root / f"{NAME}/settings.py", HARNESS)
    return InstalledProject(root=root, site=site)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + "\n" + text)


def run(args: list[str], *, cwd: Path | None = None) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
