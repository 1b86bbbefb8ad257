"""A column added to ``Run`` is a change of ``models.py`` alone (and the migration
``makemigrations`` writes for it): a copy of the app with one more field, migrated into a
scratch database, enqueues (one run and a batch), creates, inserts, claims and completes
runs through the store, the new column holding its default everywhere, with no other file
of the app changed."""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "tasks_app"
# Two new columns: a constant default, and one worked out per row (in the database for the
# statements that leave it out, in Python for the ORM).
FIELD = (
    '    scratch_note = models.CharField(max_length=20, blank=True, default="n/a", db_default="n/a")\n'
    "    scratch_seen_at = models.DateTimeField(default=timezone.now, "
    "db_default=models.functions.Now())\n"
)
ANCHOR = "    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)\n"

SCRIPT = r"""
import json, uuid
from datetime import timedelta
import django
django.setup()
import tasks_app
from tasks_app import services, store
from tasks_app.models import Run, Task
from tasks_app.services.run_create import new_run
from django.utils import timezone

now = timezone.now()
task = services.task_create(id="scratch", action="noop")
run = new_run(task, trigger="manual", due_at=now)
run.status = "queued"
store.create_run(run)
claim = store.claim_run(run_id=run.id, worker="w", now=now, overlap_checked=False)
done = store.complete_run(
    run_id=run.id, now=now, output="ok", truncated=False, result=None, cancelled_error=""
)
fire = new_run(task, trigger="backfill", due_at=now - timedelta(minutes=1))
inserted = store.insert_runs([fire], horizon_end=now)
Task.objects.create(id="scratch-fn", action="django_task", payload={"task": "scratch.fn"})
call = {"task": "scratch.fn", "args": [], "kwargs": {}, "using": {}}
one = store.enqueue_runs(
    task_id="scratch-fn", path="scratch.fn", ids=[uuid.uuid4()], payloads=[call],
    queue="", priority=None, due_at=now, now=now, horizon_end=now + timedelta(minutes=1),
)
batch = store.enqueue_runs(
    task_id="scratch-fn", path="scratch.fn", ids=[uuid.uuid4(), uuid.uuid4()],
    payloads=[call, call], queue="", priority=None, due_at=now, now=now,
    horizon_end=now + timedelta(minutes=1),
)
print(json.dumps({
    "app": tasks_app.__file__,
    "claimed": claim.refused is None and claim.run.scratch_note,
    "completed": done.status,
    "inserted": [r.status for r in inserted],
    "enqueued": [r.status for r in one + batch],
    "stored": sorted(set(Run.objects.values_list("scratch_note", flat=True))),
    "seen": Run.objects.filter(scratch_seen_at__isnull=False).count(),
    "runs": Run.objects.count(),
}))
"""


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.timeout(300)
def test_a_column_added_to_run_needs_no_other_change(tmp_path: Path) -> None:
    copy = tmp_path / "tasks_app"
    shutil.copytree(APP, copy, ignore=shutil.ignore_patterns("__pycache__"))
    models = copy / "models.py"
    text = models.read_text()
    run_class = text.index("class Run(StatusGuarded):")
    at = text.index(ANCHOR, run_class) + len(ANCHOR)
    text = text[:at] + FIELD + text[at:]
    models.write_text(
        text.replace("import uuid\n", "import uuid\n\nfrom django.utils import timezone\n", 1)
    )
    shutil.copy(REPO / "manage.py", tmp_path / "manage.py")
    (tmp_path / "project").symlink_to(REPO / "project")

    db = settings.DATABASES["default"]
    name = f"tasks_scratch_{uuid.uuid4().hex[:8]}"
    admin = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"], "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"
        env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(tmp_path)}
        for variable in ("DJANGO_SETTINGS_MODULE", "TASKS_EXTRA_APPS", "TASKS_DJANGO_TASKS"):
            env.pop(variable, None)  # the test session's apps live beside the real app

        def run(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        run("manage.py", "makemigrations", "tasks_app", "-n", "scratch_note", "-v", "0")
        run("manage.py", "migrate", "--noinput", "-v", "0")
        out = run("manage.py", "shell", "-v", "0", "-c", SCRIPT)
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    found = json.loads(out.strip().splitlines()[-1])
    assert Path(found["app"]).parent == copy  # the copy ran, not the app beside it
    assert found["claimed"] == "n/a" and found["completed"] == "completed"
    assert found["inserted"] == ["queued"] and found["enqueued"] == ["queued"] * 3
    assert found["stored"] == ["n/a"] and found["runs"] == found["seen"] == 5

    before, after = _files(APP), _files(copy)
    changed = sorted(f for f in before if f in after and before[f] != after[f])
    added = sorted(set(after) - set(before))
    assert changed == ["models.py"]
    assert len(added) == 1 and added[0].startswith("migrations/0") and "scratch_note" in added[0]
    assert set(before) <= set(after)
