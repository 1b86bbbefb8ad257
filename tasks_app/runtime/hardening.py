"""Process hardening that needs no Django: the worker (and web, beat) made non-dumpable.

``prctl(PR_SET_DUMPABLE, 0)`` makes the kernel treat the process like a set-uid program:
its ``/proc/<pid>/environ``, ``mem``, ``maps``, ``fd/`` and friends are owned by root and
readable only with ``CAP_SYS_PTRACE``, and ``ptrace`` attach is refused to processes of the
same user. So a program the ``exec`` action starts as the worker's own user cannot read the
worker's environment (``DJANGO_SECRET_KEY``, ``DATABASE_URL``, ...) or memory. The flag
belongs to the address space: forked children (Celery's pool processes) inherit it, and
``execve`` of an ordinary program resets it, so the programs themselves stay normal
processes. Side effects: no core dumps of the process, and debuggers or profilers that
attach (``py-spy``, ``gdb -p``) need root.

Hand-written with ``ctypes`` (one libc call) rather than ``python-prctl``: that package is a
C extension built against libcap headers, last released in 2020, and we need one option.
"""

from __future__ import annotations

import ctypes
import sys

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), 0, 0, 0))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}) failed")
    return result


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (Linux); ``False`` where the call does not exist."""
    if not sys.platform.startswith("linux"):
        return False
    _prctl(PR_SET_DUMPABLE, 0)
    return True


def is_dumpable() -> bool:
    """This process's dumpable flag (``True`` off Linux: nothing protects it there)."""
    if not sys.platform.startswith("linux"):
        return True
    return _prctl(PR_GET_DUMPABLE) != 0
