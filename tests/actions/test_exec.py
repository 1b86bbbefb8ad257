"""The ``exec`` action: allow-list, no shell, timeout kills the whole group, clean env."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from tasks_app import actions, services
from tasks_app.actions.program import run_program
from tasks_app.conf import app_settings
from tasks_app.models import Run, RunStatus
from tasks_app.runtime import hardening
from tests.actions.conftest import WORKER_EXEC_ALLOWLIST
from tests.actions.helpers import context, finished
from tests.processes import ROOT, Proc, wait_until

# A Python the program's user can run: the test interpreter, unless the tests run as root —
# programs then run as TASKS_EXEC_USER (nobody), who cannot reach a virtualenv under /root.
PYTHON = (
    sys.executable
    if os.geteuid() != 0
    else shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the tests do not run as root")


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A scratch directory any user can write (pytest's own is private to the test's user,
    and a program may run as another one)."""
    path = Path(tempfile.mkdtemp(prefix="tasks-test-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


HOSTILE = [
    "; touch {canary}",
    "$(touch {canary})",
    "`touch {canary}`",
    "x\ntouch {canary}",
    "&& touch {canary} #",
    "| tee {canary}",
    "*",
]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.django_db
def test_disabled_by_default_with_a_clear_error_when_saved(settings: object) -> None:
    settings.TASKS_EXEC_ALLOWLIST = []  # type: ignore[attr-defined]
    with pytest.raises(ValidationError) as info:
        services.task_create(id="run-echo", action="exec", payload={"argv": ["echo", "hello"]})
    message = " ".join(info.value.message_dict["payload"])
    assert "the exec action is disabled" in message
    assert "set the TASKS_EXEC_ALLOWLIST environment variable" in message


def test_disabled_at_run_time_too(settings: object) -> None:
    # A task saved while exec was enabled must not run after it was disabled.
    settings.TASKS_EXEC_ALLOWLIST = []  # type: ignore[attr-defined]
    with pytest.raises(actions.ActionError, match="the exec action is disabled") as info:
        run_program({"argv": ["echo", "hello"]}, context())
    assert not info.value.retryable


def test_the_shipped_default_allow_list_is_empty(tmp_path: Path) -> None:
    """A fresh embedded install (no environment at all) refuses exec at save time."""
    code = (
        "import django; django.setup()\n"
        "from tasks_app import actions\n"
        "from tasks_app.conf import app_settings\n"
        "print(repr(app_settings.EXEC_ALLOWLIST))\n"
        "try:\n"
        "    actions.get('exec').validate({'argv': ['echo', 'hi']})\n"
        "except actions.PayloadError as exc:\n"
        "    print(exc)\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "TASKS_VAR_DIR": str(tmp_path),
        # What `make run` gives its processes (no server is reached here).
        "TASKS_EMBEDDED": "1",
        "DATABASE_URL": f"postgres://postgres@/tasks?host={tmp_path}",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "[]"
    assert "the exec action is disabled" in done.stdout


@pytest.mark.django_db
def test_program_not_on_the_list_is_refused(settings: object) -> None:
    settings.TASKS_EXEC_ALLOWLIST = ["echo"]  # type: ignore[attr-defined]
    for argv0 in ["sh", "/bin/sh", "./echo", "/bin/echo", "bash"]:
        with pytest.raises(ValidationError) as info:
            services.task_create(action="exec", payload={"argv": [argv0, "-c", "id"]})
        assert f"program {argv0!r} is not allowed" in " ".join(info.value.message_dict["payload"])
    with pytest.raises(ValidationError, match="should be non-empty|is too short"):
        services.task_create(action="exec", payload={"argv": []})


def test_arguments_reach_the_program_literally(settings: object, tmp_path: Path) -> None:
    settings.TASKS_EXEC_ALLOWLIST = ["echo"]  # type: ignore[attr-defined]
    canary = tmp_path / "canary"
    args = [a.format(canary=canary) for a in HOSTILE]
    outcome = run_program({"argv": ["echo", *args]}, context(timeout_seconds=10))
    assert isinstance(outcome, actions.Outcome)
    assert outcome.output == " ".join(args) + "\n"  # byte for byte: nothing expanded
    assert outcome.result["exit_code"] == 0
    assert not canary.exists()
    assert not Path("/tmp/x").exists() or Path("/tmp/x").stat().st_mtime < time.time() - 60


SIGTERM_IGNORING_FORKER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
    sys.exit(0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {child}")
print("started", flush=True)
time.sleep(120)
"""


def test_timeout_kills_the_program_and_its_child(settings: object, open_tmp: Path) -> None:
    settings.TASKS_EXEC_ALLOWLIST = [PYTHON]  # type: ignore[attr-defined]
    pids_file = open_tmp / "pids"
    started = time.monotonic()
    with pytest.raises(actions.ActionError) as info:
        run_program(
            {"argv": [PYTHON, "-c", SIGTERM_IGNORING_FORKER, str(pids_file)]},
            context(timeout_seconds=3),
        )
    elapsed = time.monotonic() - started
    assert "timed out after 2.5 s; its process group was killed" in str(info.value)
    assert "started" in str(info.value)  # the output so far is kept for diagnosis
    assert info.value.retryable
    assert elapsed < 5
    parent, child = (int(p) for p in pids_file.read_text().split())
    assert not alive(parent)
    wait_until(lambda: not alive(child), timeout=5, message="the forked child to be gone")


def test_environment_is_path_only(settings: object, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.TASKS_EXEC_ALLOWLIST = ["env"]  # type: ignore[attr-defined]
    monkeypatch.setenv("STRIPE_SECRET_KEY", "sk_live_do_not_leak")
    outcome = run_program({"argv": ["env"]}, context())
    assert isinstance(outcome, actions.Outcome)
    assert outcome.output == f"PATH={app_settings.EXEC_PATH}\n"


def test_resource_limits_apply(settings: object) -> None:
    settings.TASKS_EXEC_ALLOWLIST = [PYTHON]  # type: ignore[attr-defined]
    settings.TASKS_EXEC_MEMORY_BYTES = 256 * 1024**2  # type: ignore[attr-defined]
    settings.TASKS_EXEC_FILE_SIZE_BYTES = 1024 * 1024  # type: ignore[attr-defined]
    code = (
        "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0],"
        " resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_CPU)[0])"
    )
    outcome = run_program({"argv": [PYTHON, "-c", code]}, context(timeout_seconds=7))
    assert outcome.output.split() == [str(256 * 1024**2), str(1024**2), "7"]  # type: ignore[union-attr]
    with pytest.raises(actions.ActionError, match="(?s)exited with status 1.*MemoryError"):
        run_program(
            {"argv": [PYTHON, "-c", "x = bytearray(512 * 1024 * 1024)"]},
            context(timeout_seconds=10),
        )


def test_output_is_capped(settings: object) -> None:
    settings.TASKS_EXEC_ALLOWLIST = [PYTHON]  # type: ignore[attr-defined]
    code = "import sys; sys.stdout.write('z' * (1024 * 1024))"
    outcome = run_program({"argv": [PYTHON, "-c", code]}, context(timeout_seconds=10))
    assert isinstance(outcome, actions.Outcome)
    assert outcome.result["output_bytes"] == 1024 * 1024
    text, truncated = services.cap_output(outcome.output)
    assert len(text) == 64 * 1024 and truncated


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_worker_secrets_never_reach_a_runs_output_or_error(
    actions_worker: object, actions_queue: str, secret_token: str, settings: object
) -> None:
    """The worker has PAYMENTS_API_TOKEN, DATABASE_URL and DJANGO_SECRET_KEY in its
    environment; a program that dumps its environment, or asks for one by name, sees none."""
    settings.TASKS_EXEC_ALLOWLIST = WORKER_EXEC_ALLOWLIST  # type: ignore[attr-defined]  # as the web
    dump = services.task_create(
        id="dump-env", action="exec", queue=actions_queue, payload={"argv": ["env"]}
    )
    ask = services.task_create(
        id="ask-env",
        action="exec",
        queue=actions_queue,
        max_retries=0,
        payload={"argv": ["printenv", "PAYMENTS_API_TOKEN"]},
    )
    literal = services.task_create(
        id="literal",
        action="exec",
        queue=actions_queue,
        payload={"argv": ["echo", "$PAYMENTS_API_TOKEN", "$(env)"]},
    )
    runs = [services.task_execute(task=t) for t in (dump, ask, literal)]
    for run in runs:
        wait_until(lambda run=run: finished(run), timeout=30, message="the exec run")
    dumped, asked, echoed = runs
    assert dumped.status == RunStatus.COMPLETED and dumped.output.startswith("PATH=")
    assert asked.status == RunStatus.FAILED and "exited with status 1" in asked.error
    assert echoed.status == RunStatus.COMPLETED and echoed.output == "$PAYMENTS_API_TOKEN $(env)\n"
    for run in runs:
        text = f"{run.output}\n{run.error}\n{run.result}"
        assert secret_token not in text
        for name in ("PAYMENTS_API_TOKEN=", "DATABASE_URL", "DJANGO_SECRET_KEY", "postgres://"):
            assert name not in text


@as_root
def test_a_root_worker_runs_programs_as_the_exec_user(settings: object) -> None:
    """Root's programs run as TASKS_EXEC_USER with its own group and no supplementary ones,
    in a working directory they can use."""
    settings.TASKS_EXEC_ALLOWLIST = [PYTHON]  # type: ignore[attr-defined]
    nobody = pwd.getpwnam("nobody")
    code = (
        "import os; open('scratch', 'w').write('x');"
        " print(os.getuid(), os.getgid(), os.getgroups())"
    )
    outcome = run_program({"argv": [PYTHON, "-c", code]}, context(timeout_seconds=10))
    assert outcome.output.split(maxsplit=2) == [  # type: ignore[union-attr]
        str(nobody.pw_uid),
        str(nobody.pw_gid),
        "[]\n",
    ]


@as_root
def test_an_unknown_exec_user_fails_the_run_instead_of_running_as_root(settings: object) -> None:
    settings.TASKS_EXEC_ALLOWLIST = ["echo"]  # type: ignore[attr-defined]
    settings.TASKS_EXEC_USER = "no-such-user-here"  # type: ignore[attr-defined]
    with pytest.raises(actions.ActionError, match="TASKS_EXEC_USER='no-such-user-here'") as info:
        run_program({"argv": ["echo", "hi"]}, context())
    assert not info.value.retryable


# Sets the flag as the worker does (or not), then has a same-user program read its environ.
READ_OWN_ENVIRON = """
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from tasks_app.runtime import hardening
if sys.argv[2] == "harden":
    hardening.make_non_dumpable()
done = subprocess.run(["cat", f"/proc/{os.getpid()}/environ"], capture_output=True)
print(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(), sep="|")
"""


@pytest.mark.parametrize("harden", [False, True], ids=["dumpable", "non-dumpable"])
def test_a_same_user_program_cannot_read_a_non_dumpable_parents_environ(
    harden: bool, open_tmp: Path
) -> None:
    """The worker's own protection when it does not run as root: the same-user child reads
    the parent's environment only while the parent is dumpable. (As root the parent runs
    unprivileged via setpriv, since root may read any process.)"""
    script = open_tmp / "read_environ.py"
    script.write_text(READ_OWN_ENVIRON)
    script.chmod(0o644)
    python = PYTHON
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is needed to drop root for this test")
        prefix = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "WORKER_SECRET": "s3cr3t-value"}
    done = subprocess.run(
        [*prefix, python, str(script), str(ROOT), "harden" if harden else "plain"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    status, out, err = done.stdout.rstrip("\n").split("|", 2)
    if harden:
        assert status == "1" and "Permission denied" in err
        assert "s3cr3t-value" not in out
    else:  # the control: without the flag the leak the issue reported is real
        assert status == "0" and "WORKER_SECRET=s3cr3t-value" in out


def test_non_dumpable_survives_fork() -> None:
    """Celery's pool processes are forked from the worker after it set the flag."""
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); from tasks_app.runtime import hardening\n"
        "hardening.make_non_dumpable()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if not hardening.is_dumpable() else 3)\n"
        "print(os.waitpid(pid, 0)[1] >> 8, hardening.is_dumpable())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=30
    )
    assert done.stdout.split() == ["0", "False"], done.stderr
    assert hardening.is_dumpable()  # the test process itself is untouched


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_program_cannot_read_the_real_workers_environ(
    actions_worker: Proc, actions_queue: str, secret_token: str, settings: object
) -> None:
    """The issue's attack on a real ``celery worker``: with ``cat`` allowed, read
    ``/proc/self/stat`` for the parent (the pool process), then that process's and the main
    worker's ``environ``. Both reads fail; no run's output or error holds a secret. Run as
    root, this covers the switch to TASKS_EXEC_USER; run as any other user, the worker and
    ``cat`` share a user and it covers the non-dumpable flag alone."""
    settings.TASKS_EXEC_ALLOWLIST = WORKER_EXEC_ALLOWLIST  # type: ignore[attr-defined]

    def run_cat(task_id: str, path: str) -> Run:
        task = services.task_create(
            id=task_id, action="exec", queue=actions_queue, payload={"argv": ["cat", path]}
        )
        run = services.task_execute(task=task)
        wait_until(lambda: finished(run), timeout=30, message=f"the run of {task_id}")
        return run

    stat = run_cat("own-stat", "/proc/self/stat")
    assert stat.status == RunStatus.COMPLETED, stat.error
    pool_pid = int(stat.output.rsplit(")", 1)[1].split()[1])  # field 4: the parent's pid
    assert pool_pid != actions_worker.popen.pid
    reads = [
        run_cat("pool-environ", f"/proc/{pool_pid}/environ"),
        run_cat("worker-environ", f"/proc/{actions_worker.popen.pid}/environ"),
    ]
    for run in reads:
        assert run.status == RunStatus.FAILED
        assert "exited with status 1" in run.error and "Permission denied" in run.error
        text = f"{run.output}\n{run.error}\n{run.result}"
        assert secret_token not in text
        assert "DJANGO_SECRET_KEY" not in text and "DATABASE_URL" not in text
