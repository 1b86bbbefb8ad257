"""The ``exec`` action: an allow-listed program run as an argv list, never through a shell.

- **Allow-list.** ``argv[0]`` must be a name in ``TASKS_EXEC_ALLOWLIST`` (looked up on
  ``TASKS_EXEC_PATH``) or an absolute path listed there verbatim. The list is empty by
  default, which disables the action; that is checked when the task is saved and again
  when it runs.
- **No shell.** The argv goes to ``execve`` as is: ``;``, ``$(...)``, backticks, globs and
  newlines in arguments are just characters.
- **Clean environment.** The program gets ``PATH`` and nothing else, so the worker's
  secrets (``DJANGO_SECRET_KEY``, ``DATABASE_URL``, tokens) are not there to leak. It runs
  in a fresh temporary directory with stdin closed.
- **Not the worker's secrets by other means.** The worker is non-dumpable
  (``tasks_app.runtime.hardening``), so a program running as the worker's user cannot read
  ``/proc/<worker>/environ`` or its memory. A worker running as root starts programs as
  ``TASKS_EXEC_USER`` (``nobody`` by default; primary group only), who cannot read root's
  processes or files. What this does not isolate: docs/actions.md#what-the-sandbox-isolates.
- **Limits.** CPU seconds, address space and file size (``TASKS_EXEC_*``) via ``setrlimit``
  in the child; no core dumps.
- **Timeout.** The program leads its own process group (``start_new_session``); on the
  timeout (the task's ``timeout_seconds`` less a small margin, so this fires before Celery's
  soft limit) the whole group gets SIGKILL, which SIGTERM-ignoring programs and their
  children cannot survive. The group is also killed after a normal exit, so nothing it left
  in the background keeps running. The group is signalled while the leader is still an
  unreaped zombie, so its id cannot have been reused by an unrelated process.
- **Output.** stdout and stderr, merged, are kept up to the run output limit; the rest is
  read and discarded so the program never blocks on a full pipe.
"""

from __future__ import annotations

import math
import os
import pwd
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..conf import app_settings
from .base import JSON, ActionError, Outcome, PayloadError, RunContext, register

TIMEOUT_MARGIN_SECONDS = 0.5
DRAIN_SECONDS = 2.0
POLL_SECONDS = 0.02

SCHEMA: dict[str, JSON] = {
    "type": "object",
    "properties": {
        "argv": {
            "type": "array",
            "items": {"type": "string", "maxLength": 100_000},
            "minItems": 1,
            "maxItems": 1000,
        },
    },
    "required": ["argv"],
    "additionalProperties": False,
}

DISABLED = (
    "the exec action is disabled: TASKS_EXEC_ALLOWLIST is empty. To enable it, set the "
    "TASKS_EXEC_ALLOWLIST environment variable of the web and worker processes to a "
    "comma-separated list of program names or absolute paths, e.g. "
    "TASKS_EXEC_ALLOWLIST=echo,/usr/local/bin/backup"
)


def program_error(program: str) -> str | None:
    """Why ``program`` (``argv[0]``) may not run, or ``None``."""
    allowed = app_settings.EXEC_ALLOWLIST
    if not allowed:
        return DISABLED
    if program not in allowed:
        return (
            f"program {program!r} is not allowed; allowed programs: {', '.join(allowed)} "
            "(setting TASKS_EXEC_ALLOWLIST; give a listed name or the exact listed path)"
        )
    if "/" in program and not os.path.isabs(program):
        return f"program {program!r}: give a bare name or an absolute path"
    return None


def resolve(program: str) -> str:
    """The absolute path to execute for an allowed ``program``."""
    if os.path.isabs(program):
        path: str | None = program
    else:
        path = shutil.which(program, path=app_settings.EXEC_PATH)
    if path is None or not os.access(path, os.X_OK) or os.path.isdir(path):
        raise ActionError(
            f"program {program!r} not found or not executable (TASKS_EXEC_PATH="
            f"{app_settings.EXEC_PATH})",
            retryable=False,
        )
    return path


def check_payload(payload: dict[str, JSON]) -> None:
    error = program_error(str(payload["argv"][0]))
    if error:
        raise PayloadError([f"argv.0: {error}"])


@register(
    "exec",
    schema=SCHEMA,
    description="Runs an allow-listed program (TASKS_EXEC_ALLOWLIST) without a shell.",
    validate=check_payload,
    permission="tasks_app.use_action_exec",
)
def run_program(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    argv = [str(arg) for arg in payload["argv"]]
    error = program_error(argv[0])
    if error:
        raise ActionError(error, retryable=False)
    executable = resolve(argv[0])
    timeout = float(ctx.timeout_seconds or app_settings.DEFAULT_TIMEOUT_SECONDS)
    own_timeout = max(timeout - TIMEOUT_MARGIN_SECONDS, min(timeout, 1.0))
    finished = run_argv(
        executable, argv, timeout=own_timeout, limit=app_settings.OUTPUT_LIMIT_BYTES
    )
    text = finished.output.decode("utf-8", errors="replace")
    if finished.timed_out:
        raise ActionError(
            f"{argv[0]} timed out after {own_timeout:g} s; its process group was killed\n\n{text}"
        )
    if finished.returncode < 0:
        name = signal.Signals(-finished.returncode).name
        raise ActionError(f"{argv[0]} was killed by {name} (resource limit?)\n\n{text}")
    if finished.returncode != 0:
        raise ActionError(f"{argv[0]} exited with status {finished.returncode}\n\n{text}")
    return Outcome(
        output=text,
        result={"exit_code": 0, "output_bytes": finished.output_bytes},
    )


@dataclass(frozen=True)
class Identity:
    """The user and group a program runs as."""

    name: str
    uid: int
    gid: int


def exec_identity() -> Identity | None:
    """Who programs run as: ``None`` (the worker's own user) unless the worker runs as root,
    then ``TASKS_EXEC_USER``. An unknown user fails the run rather than run it as root."""
    if os.geteuid() != 0:
        return None
    name = app_settings.EXEC_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ActionError(
            f"TASKS_EXEC_USER={name!r} is not a user on this machine; the worker runs as "
            "root and will not run programs as root (set TASKS_EXEC_USER to an "
            "unprivileged user, e.g. nobody)",
            retryable=False,
        ) from None
    return Identity(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


@dataclass(frozen=True)
class Finished:
    returncode: int
    output: bytes
    output_bytes: int
    timed_out: bool


def clean_environment() -> dict[str, str]:
    """What the program sees of the environment: ``PATH`` only."""
    return {"PATH": app_settings.EXEC_PATH}


def _limits(cpu_seconds: int, memory_bytes: int, file_bytes: int) -> None:
    """Runs in the child between fork and exec: only async-signal-safe-ish calls."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu_seconds > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if file_bytes > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


def run_argv(executable: str, argv: list[str], *, timeout: float, limit: int) -> Finished:
    """Run ``argv`` (``executable`` is the resolved ``argv[0]``) with the limits above."""
    cpu = app_settings.EXEC_CPU_SECONDS or math.ceil(timeout)
    memory, files = app_settings.EXEC_MEMORY_BYTES, app_settings.EXEC_FILE_SIZE_BYTES
    identity = exec_identity()
    kept = bytearray()
    total = 0
    timed_out = False

    def take(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)
        if len(kept) <= limit:
            kept.extend(chunk[: limit + 1 - len(kept)])

    with tempfile.TemporaryDirectory(prefix="tasks-exec-") as workdir:
        if identity is not None:
            # Popen switches to the user after entering the working directory: root's 0700
            # temporary directory is handed over first, so the program can use it.
            os.chown(workdir, identity.uid, identity.gid)
        try:
            proc = _start(argv, executable, workdir, identity, lambda: _limits(cpu, memory, files))
        except OSError as exc:  # e.g. the program is not executable by TASKS_EXEC_USER
            who = f" as user {identity.name}" if identity else ""
            raise ActionError(
                f"cannot start {argv[0]}{who}: {exc.strerror or exc}", retryable=False
            ) from exc
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        deadline = time.monotonic() + timeout
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                open_pipe = True
                while not _exited(proc.pid):
                    if time.monotonic() >= deadline:
                        timed_out = True
                        break
                    if open_pipe and selector.select(timeout=POLL_SECONDS):
                        open_pipe = _read_some(fd, take)
                        if not open_pipe:
                            selector.unregister(fd)
                    elif not open_pipe:
                        time.sleep(POLL_SECONDS)
        finally:
            # Also on SoftTimeLimitExceeded or any other exception: nothing survives us.
            _kill_group(proc.pid)
            proc.wait()
            _drain(fd, take)
            proc.stdout.close()
    return Finished(
        returncode=proc.returncode, output=bytes(kept), output_bytes=total, timed_out=timed_out
    )


def _start(
    argv: list[str],
    executable: str,
    workdir: str,
    identity: Identity | None,
    limits: Callable[[], None],
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603  (no shell: the argv list goes straight to execve)
        argv,
        executable=executable,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=clean_environment(),
        cwd=workdir,
        start_new_session=True,
        close_fds=True,
        preexec_fn=limits,
        user=identity.uid if identity else None,
        group=identity.gid if identity else None,
        extra_groups=[] if identity else None,
    )


def _exited(pid: int) -> bool:
    """Has ``pid`` exited? Leaves it unreaped (``WNOWAIT``), so its group id stays ours."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read_some(fd: int, take: Callable[[bytes], None]) -> bool:
    """Read what is available; ``False`` at end of file."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    take(chunk)
    return True


def _drain(fd: int, take: Callable[[bytes], None]) -> None:
    """Read what the (now dead) group left in the pipe, for at most ``DRAIN_SECONDS``."""
    deadline = time.monotonic() + DRAIN_SECONDS
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                if not _read_some(fd, take):
                    return
