"""One process serves a SQLite file's advisory keys: an exclusive ``flock`` on a file beside the
database (``<database>-trinbox-advisory``), held while a pool of this process serves them.

The keys in work live in the process's registry, which another process cannot see: two
processes serving one file could hand out two rows of one key at once. The lock is taken
without waiting, so a second process is refused at startup; the kernel frees it when the
process ends, however it ends. The lock is counted per process (brokers naming one file
another way, apps run on several threads share it) and never taken on the database file
itself: closing a descriptor of that file would drop SQLite's own POSIX locks. The lock file
stays behind, as SQLite's ``-wal`` and ``-shm`` files do.
"""

from __future__ import annotations

import os
import threading

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no detection
    fcntl = None  # type: ignore[assignment]

from .._errors import StartupError

__all__ = ["hold", "let_go", "lock_path"]

_lock = threading.Lock()
_held: dict[str, tuple[int, int]] = {}  # real path -> (descriptor, holders in this process)


def lock_path(database: str) -> str:
    return os.path.realpath(database) + "-trinbox-advisory"


def hold(database: str) -> None:
    """Count this process as serving ``database``'s advisory keys; ``KeysServed`` when another
    process does (a ``StartupError``)."""
    if fcntl is None:
        return
    path = lock_path(database)
    with _lock:
        if path in _held:
            fd, holders = _held[path]
            _held[path] = (fd, holders + 1)
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            msg = (
                f"one process serves the advisory keys of a SQLite file (the keys in work live "
                f"in its memory), found process {other} serving {os.path.realpath(database)} "
                f"(it holds {path}); stop that process, or serve this queue from it"
            )
            raise StartupError(msg) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[path] = (fd, 1)


def let_go(database: str) -> None:
    """One holder of this process is done; the last one frees the lock."""
    if fcntl is None:
        return
    path = lock_path(database)
    with _lock:
        if path not in _held:
            return
        fd, holders = _held[path]
        if holders > 1:
            _held[path] = (fd, holders - 1)
            return
        del _held[path]
        os.close(fd)  # frees the flock
