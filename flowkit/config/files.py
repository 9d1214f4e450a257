"""Config files: where a name or an ``include`` is looked for, and the include expansion.

``include 'x.gin'`` is resolved against the *including file's* directory first, then the
working directory, ``./gin`` and the repository's ``gin/`` (gin itself resolves against
the working directory only, gin-config #104); each file is read once, includes before the
file that includes them (`expand_includes`).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from flowkit import entry_points
from flowkit.errors import ConfigError

__all__ = ["REPO_GIN", "expand_includes", "read_gin", "resolve_config_file", "search_path"]

REPO_GIN = Path(__file__).resolve().parents[2] / "gin"
_INCLUDE = re.compile(r"""^\s*include\s+(['"])(?P<path>.+?)\1\s*(#.*)?$""")


def search_path(cwd: Path | None = None) -> list[Path]:
    """Directories searched for a config file or include not found relative to its includer."""
    cwd = Path.cwd() if cwd is None else cwd
    out = [cwd, cwd / "gin"]
    if REPO_GIN.is_dir():  # a clone: `gin/x.gin` and `x.gin` work from any directory
        out += [REPO_GIN.parent, REPO_GIN]
    return list(dict.fromkeys(out))


def resolve_config_file(name: str | Path, relative_to: Path | None = None) -> Path:
    """The config file ``name`` refers to.

    Raises:
        ConfigError: not found; the message lists where it was looked for and the closest
            existing file, written the way ``name`` was. A folder, or a path that is not a
            regular file (a FIFO, which would block the read), is refused naming it.
    """
    path = Path(name)
    if path.is_absolute():
        candidates = [path]
    else:
        roots = ([relative_to] if relative_to is not None else []) + search_path()
        candidates = list(dict.fromkeys(root / path for root in roots))  # ordered, unique
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    for candidate in candidates:
        if candidate.exists() and not candidate.is_dir():  # a FIFO, socket or device: reading it could block
            raise ConfigError(f"config file {str(name)!r} ({candidate}) is not a regular file; give a .gin file")
        if candidate.is_dir():
            inside = sorted(p.name for p in candidate.glob("*.gin"))[:3]
            hint = f", e.g. {candidate / inside[0]}" if inside else ""
            raise ConfigError(f"config file {str(name)!r} is a directory ({candidate}); give a .gin file{hint}")
    near: list[str] = []
    for candidate in candidates:
        if candidate.parent.is_dir():
            names = sorted(p.name for p in candidate.parent.glob("*.gin"))
            close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.7)
            near += [str(path.parent / n) if path.parent != Path(".") else n for n in close]
    hint = entry_points.did_you_mean(list(dict.fromkeys(near))[:3])
    where = ", ".join(dict.fromkeys(str(c.parent) for c in candidates if c.parent.is_dir())) or "nowhere that exists"
    raise ConfigError(f"config file {str(name)!r} not found{hint}; looked in: {where}")


def read_gin(path: Path) -> str:
    """The text of gin file ``path`` (a UTF-8 byte order mark, which some editors write, is dropped).

    Raises:
        ConfigError: the file is not UTF-8 text (a binary file, another encoding), naming
            the line of the first bad byte.
    """
    data = path.read_bytes()
    bad = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
    else:
        if bad < 0:
            return text.removeprefix("\ufeff")
    line = data[:bad].count(b"\n") + 1
    raise ConfigError(
        f"{path}:{line}: not a gin text file (byte {bad} is {data[bad:bad + 1]!r}, not UTF-8 text); "
        "give a gin file saved as UTF-8"
    )


def expand_includes(path: Path, order: list[tuple[Path, str, str]], stack: tuple[Path, ...]) -> None:
    """Depth-first include expansion: includes before the file that includes them.

    Appends ``(path, text as read, text with its include lines blanked)`` to ``order``.
    An include names a ``.gin`` file: any other file is refused unread (`ConfigError`), so
    no error message ever shows a line of it.
    A file already in ``order`` is not read again: an overlay that includes base.gin,
    given after an experiment that included it too, does not reset the experiment's
    values (t5x-style layering: each file applies once, where it is first included).
    """
    if path in stack:
        chain = " -> ".join(str(p) for p in (*stack, path))
        raise ConfigError(f"include cycle: {chain}; remove one of the includes")
    if any(done == path for done, _, _ in order):
        return
    text = read_gin(path)
    kept: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _INCLUDE.match(line)
        if m is None:
            kept.append(line)
            continue
        try:
            included = resolve_config_file(m.group("path"), relative_to=path.parent)
        except ConfigError as exc:
            raise ConfigError(f"{path}:{lineno}: {exc}") from None
        if included.suffix != ".gin":  # its text would be echoed in a syntax error: a config reads gin files only
            raise ConfigError(
                f"{path}:{lineno}: include {m.group('path')!r} names a file that is not a .gin file; "
                "a config includes gin files only: include the .gin file that holds these bindings"
            )
        expand_includes(included, order, (*stack, path))
        kept.append("")  # keep line numbers of the rest of the file
    order.append((path, text, "\n".join(kept) + "\n"))
