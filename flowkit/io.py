"""Atomic file writes: a reader sees the old file or the new one, never a torn one.

Each write goes to a temporary file in the same directory (so the final rename never
crosses filesystems), is flushed and fsynced, replaces the target with `os.replace`, and
then the directory itself is fsynced so the rename survives a power cut.

Raises OSError as the operating system reports it (ENOSPC on a full disk); the target is
untouched when a write fails and the temporary file is removed.

Every command that writes follows one policy, built here: `check_out_path` refuses, before
any work, an ``--out`` folder where a file stands (or a file where a folder stands);
`check_writable` refuses, before any work, a folder on a read-only or full file system or one the user may not write to;
`refused_writes` turns a write the file system refuses later (ENOSPC, EDQUOT, EFBIG,
EROFS, and torch's writer failing on a full disk) into one `WriteError`
line naming the path and the fix. The writer itself removes what it had begun (its
temporary file or hidden partial folder), so nothing half-made is left.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from flowkit.errors import WriteError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; a written file should get the mode a plain open() gives it
_FILE_MODE = 0o666 & ~_umask()


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so the entries renamed into it are durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def missing_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """The folders of ``path`` (itself included) that do not exist yet, deepest first: what a
    writer that creates them must remove again when it fails (`remove_dirs`)."""
    out = []
    folder = Path(os.path.abspath(path))
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def remove_dirs(folders: list[Path]) -> None:
    """Remove the (empty) folders `missing_dirs` listed, deepest first; others are kept."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, directory fsync).
    Parent folders it had to create are removed again when the write fails."""
    target = Path(path)
    created = missing_dirs(target.parent)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except BaseException:
        remove_dirs(created)
        raise
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        remove_dirs(created)
        raise
    fsync_dir(target.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


# ---- the policy of every writer -----------------------------------------------------------

#: errno of a write the file system refused -> (what happened, the fix)
_REFUSED = {
    errno.ENOSPC: ("the disk is full", "free space there, or choose another place"),
    errno.EDQUOT: ("the disk quota is used up", "free space in your quota, or choose another place"),
    errno.EFBIG: ("a file grew past the file system's size limit", "choose a file system without that limit"),
    errno.EROFS: ("the file system is read-only", "choose a place on a writable file system"),
    errno.EACCES: ("permission denied", "choose a place you may write to, or fix its permissions"),
    errno.EPERM: ("operation not permitted", "choose a place you may write to, or fix its permissions"),
}
#: errno values only a write can raise (a read never does)
_WRITE_ONLY = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)
#: free bytes under which a failed write is put down to a full disk (torch's writer loses the errno)
_NEARLY_FULL = 64 << 20


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free_bytes(folder: Path) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    # root may use the blocks reserved for it; others may not
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def _mount_point(path: Path) -> Path:
    """The top folder of the file system ``path`` is on."""
    path = _nearest_existing(path)
    try:
        device = path.stat().st_dev
        while path != path.parent and path.parent.stat().st_dev == device:
            path = path.parent
    except OSError:
        pass
    return path


def _refuse(label: str, target: Path | str, code: int) -> NoReturn:
    reason, fix = _REFUSED[code]
    if code in (errno.ENOSPC, errno.EROFS):
        reason += f" (the file system at {_mount_point(Path(target))})"
    raise WriteError(f"{label}: cannot write {target}: {reason}; {fix}")


def check_writable(folder: str | os.PathLike[str], *, label: str) -> None:
    """Refuse, before any work, to write in ``folder`` (or, while it does not exist yet, in
    its nearest existing parent) when its file system is read-only or full, or this user
    may not create files there. ``label`` names the option in the message, e.g. ``"--out runs/a"``.

    Raises:
        WriteError: one line naming the folder, the reason and the fix.
    """
    where = _nearest_existing(Path(folder))
    if not where.is_dir():
        return  # a file in the way: the command's own checks name it
    try:
        st = os.statvfs(where)
    except OSError:
        return
    if st.f_flag & os.ST_RDONLY:
        _refuse(label, where, errno.EROFS)
    if not os.access(where, os.W_OK | os.X_OK):
        _refuse(label, where, errno.EACCES)
    if st.f_blocks and _free_bytes(where) == 0:
        _refuse(label, where, errno.ENOSPC)
    try:  # a place that passes the checks above and still makes nothing (/proc, /sys)
        os.rmdir(tempfile.mkdtemp(prefix=".flowkit-probe-", dir=where))
    except OSError as exc:
        reason = _REFUSED.get(exc.errno or 0, (exc.strerror or str(exc), ""))[0]
        raise WriteError(f"{label}: cannot write {where}: nothing can be created there ({reason}); "
                         "choose a folder on an ordinary writable disk") from None


def check_out_path(path: str | os.PathLike[str], *, label: str, folder: bool) -> None:
    """Refuse, before any work, an output path that cannot be made: a folder (``folder``)
    where a file stands, a file where a folder stands, or a file among its parents.
    ``label`` names the option, e.g. ``"--out runs/a"``.

    Raises:
        ConfigError: one line naming what is in the way and the fix.
    """
    from flowkit.errors import ConfigError

    target = Path(os.path.abspath(path))
    if target.exists():
        if folder and not target.is_dir():
            raise ConfigError(f"{label}: {target} is a file, not a folder; "
                              "give a folder (a new path, or an existing folder)")
        if not folder and target.is_dir():
            raise ConfigError(f"{label}: {target} is a folder; give a file name in it, e.g. {target / 'out.wav'}")
        return
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{label}: {parent} is a file, so nothing can be written under it; give another path")
            return


def torch_write_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's archive writer failing (it raises RuntimeError, errno lost)."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "PytorchStreamWriter" in text or "inline_container" in text or "file write failed" in text)


def as_os_error(exc: BaseException, folder: str | os.PathLike[str]) -> BaseException:
    """torch's writer failure in ``folder`` as the OSError the file system gave (EROFS, or
    ENOSPC when under 64 MB are left); any other exception is returned as it is."""
    if not torch_write_failed(exc):
        return exc
    where = _nearest_existing(Path(folder))
    try:
        read_only = bool(os.statvfs(where).f_flag & os.ST_RDONLY)
    except OSError:
        return exc
    free = _free_bytes(where)
    if read_only:
        return OSError(errno.EROFS, f"Read-only file system (torch: {exc})", str(folder))
    if free is not None and free < _NEARLY_FULL:
        return OSError(errno.ENOSPC, f"No space left on device (torch: {exc})", str(folder))
    return exc


@contextlib.contextmanager
def refused_writes(label: str, folder: str | os.PathLike[str]) -> Iterator[None]:
    """Turn a write that the file system refuses inside the block into one `WriteError`
    naming the file (or ``folder``) and the fix; other errors pass unchanged.

    EACCES and EPERM are left alone here (a read of an input can raise them too):
    `check_writable` has checked the permission before the block.

    Raises:
        WriteError: for OSError ENOSPC, EDQUOT, EFBIG and EROFS, and torch's writer failing
            on a full or read-only disk.
    """
    try:
        yield
    except (OSError, RuntimeError) as exc:
        mapped = as_os_error(exc, folder)
        if not isinstance(mapped, OSError) or mapped.errno not in _WRITE_ONLY:
            raise
        target = mapped.filename if mapped.filename else folder
        _refuse(label, target, mapped.errno)  # raised here: the OSError stays its __context__


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 hex digest of the file at ``path``, read in 4 MiB pieces (memory stays flat
    for a multi-GB checkpoint).

    Raises:
        OSError: the file cannot be read.
    """
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
