"""A wall clock of its own for a child process, that a test can step while the process runs:
Debian's libfaketime (``faketime``/``libfaketime`` packages) preloaded into the child, its
offset read from a file on every call (``FAKETIME_TIMESTAMP_FILE``, ``FAKETIME_NO_CACHE``).

Only the wall clock moves (``time.time()``, ``datetime.now()``, ``CLOCK_REALTIME``): the
monotonic clock stays the host's (``FAKETIME_DONT_FAKE_MONOTONIC``), as it does when NTP or an
operator steps a real host's clock, and file times are left alone (``NO_FAKE_STAT``).

libfaketime also intercepts ``clock_nanosleep`` and turns the relative sleeps of Python's
``time.sleep`` into ``EINVAL`` (0.9.10). A one-function shim, compiled with ``gcc`` once per
test session and preloaded ahead of libfaketime, makes that call the kernel's directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The kernel's clock_nanosleep, not libfaketime's (which breaks relative sleeps). */
int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *request,
                    struct timespec *remain) {
    long done = syscall(SYS_clock_nanosleep, clock_id, flags, request, remain);
    return done == -1 ? errno : 0;
}
"""


class FaketimeUnavailable(RuntimeError):
    """libfaketime or gcc is missing (``apt-get install faketime libfaketime gcc``)."""


_shim: Path | None = None


def shim() -> Path:
    """The ``clock_nanosleep`` shim, compiled on first use in this session."""
    global _shim
    if _shim is not None:
        return _shim
    if not LIBFAKETIME.exists():
        raise FaketimeUnavailable(f"{LIBFAKETIME} is missing (apt-get install libfaketime)")
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FaketimeUnavailable("gcc is missing (apt-get install gcc)")
    folder = Path(tempfile.mkdtemp(prefix="faketime-shim-"))
    (folder / "shim.c").write_text(SHIM_SOURCE)
    done = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-o", "shim.so", "shim.c"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise FaketimeUnavailable(f"gcc could not build the sleep shim: {done.stderr[-500:]}")
    _shim = folder / "shim.so"
    return _shim


class SteppedClock:
    """The wall clock of the processes started with :meth:`env`: the host's plus ``offset``
    seconds, changed at once for all of them by :meth:`set` or :meth:`step`."""

    def __init__(self, folder: Path, name: str, offset: float = 0.0) -> None:
        self.path = Path(folder) / f"faketime-{name}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.offset = 0.0
        self.set(offset)

    def env(self) -> dict[str, str]:
        """The environment variables that give a child process this clock."""
        return {
            "LD_PRELOAD": f"{shim()}:{LIBFAKETIME}",
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "NO_FAKE_STAT": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def set(self, offset: float) -> None:
        """Put the clock ``offset`` seconds off the host's (negative: behind). The file is
        replaced whole, so a process never reads half of it."""
        self.offset = float(offset)
        spare = self.path.with_name(self.path.name + ".new")
        spare.write_text(f"{self.offset:+.3f}s\n")
        os.replace(spare, self.path)

    def step(self, delta: float) -> None:
        """Move the clock by ``delta`` seconds from where it is."""
        self.set(self.offset + delta)
