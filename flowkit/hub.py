"""``hf://OWNER/REPO/PATH[@REVISION]``: models referenced where users keep them.

Wherever flowkit takes a checkpoint, run or vocoder path (``flowkit import-f5``,
``--vocoder-path``, ``vocoder.vocos.path`` in gin, ``--init-from``, and every checkpoint or
run read through `flowkit.checkpoints.files.resolve_checkpoint` or
`flowkit.report.rundir.read_run`: synthesize, eval, report, export-f5), a reference of the
form ``hf://OWNER/REPO/PATH`` names a file or folder of a Hugging Face Hub repository
(``@REVISION``, a branch, tag or commit, may follow the path or the repository name:
``hf://OWNER/REPO@v1/PATH``); ``hf://OWNER/REPO`` is the whole repository. `resolve`
turns it into a local path through ``huggingface_hub``:

- the local cache is used first (``local_files_only``): a file once fetched is never
  fetched again, and nothing is contacted when it is there;
- with ``HF_HUB_OFFLINE=1`` nothing is contacted at all; a file missing from the cache is
  one line naming the cache directory and the command that fetches it
  (``hf download OWNER/REPO PATH``, or ``huggingface-cli download`` for releases before
  0.34 that lack ``hf``), to run where the hub is reachable;
- otherwise it is downloaded into that cache (``hf_hub_download``, or
  ``snapshot_download`` for a folder) and the cached path returned.

The cache is huggingface_hub's own (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
``~/.cache/huggingface/hub``), read from the environment at each call.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import attrs

from flowkit.errors import CheckpointError, ConfigError

__all__ = ["SCHEME", "HubRef", "cache_dir", "fetch_command", "is_hub", "parse", "resolve"]

SCHEME = "hf://"
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REF = re.compile(rf"^hf://(?P<owner>{_PART})/(?P<repo>{_PART})(?:@(?P<rev1>[^/@]+))?(?:/(?P<path>[^@]*?))?/?(?:@(?P<rev2>[^/@]+))?$")


@attrs.frozen
class HubRef:
    """A parsed ``hf://`` reference: ``repo_id`` ("OWNER/REPO"), ``path`` inside it ("" for
    the whole repository) and ``revision`` (None: the default branch)."""

    repo_id: str
    path: str
    revision: str | None

    def __str__(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"{SCHEME}{self.repo_id}{'/' + self.path if self.path else ''}{rev}"


def _text(ref: object) -> str:
    """``ref`` as text; a `pathlib.Path` made of ``hf://x`` reads ``hf:/x`` (one slash
    folded), so that form is taken back (a command-line option typed as a path)."""
    text = os.fspath(ref) if isinstance(ref, os.PathLike) else str(ref)
    if text.startswith("hf:/") and not text.startswith(SCHEME):
        text = SCHEME + text[len("hf:/"):]
    return text


def is_hub(ref: object) -> bool:
    """Whether ``ref`` (a string or path) is an ``hf://`` reference."""
    return isinstance(ref, (str, os.PathLike)) and _text(ref).startswith(SCHEME)


def parse(ref: str | os.PathLike[str]) -> HubRef:
    """``hf://OWNER/REPO[/PATH][@REVISION]`` as a `HubRef`.

    Raises:
        ConfigError: not of that form (e.g. no repository name, two revisions).
    """
    ref = _text(ref)
    m = _REF.match(ref)
    if m is None or (m.group("rev1") and m.group("rev2")):
        raise ConfigError(
            f"{ref!r} is not a Hugging Face reference; write hf://OWNER/REPO/PATH[@REVISION], "
            "e.g. hf://charactr/vocos-mel-24khz or hf://SWivid/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors"
        )
    path = (m.group("path") or "").strip("/")
    if ".." in path.split("/"):
        raise ConfigError(f"{ref!r}: a path inside a repository cannot contain '..'")
    return HubRef(f"{m.group('owner')}/{m.group('repo')}", path, m.group("rev1") or m.group("rev2"))


def cache_dir() -> Path:
    """huggingface_hub's cache directory as the environment sets it now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def fetch_command(ref: HubRef) -> str:
    """The shell command that puts ``ref`` into the cache: ``hf download`` where the
    installed huggingface_hub has it (0.34 and later), else ``huggingface-cli download``."""
    try:
        import huggingface_hub

        version = tuple(int(x) for x in re.findall(r"\d+", huggingface_hub.__version__)[:2])
    except (ImportError, ValueError):
        version = (1, 0)
    tool = "hf download" if version >= (0, 34) else "huggingface-cli download"
    target = f" {ref.path}" if ref.path else ""
    include = f" --include '{ref.path}/*'" if ref.path and "." not in ref.path.rsplit("/", 1)[-1] else ""
    if include:
        target = ""
    rev = f" --revision {ref.revision}" if ref.revision else ""
    return f"{tool} {ref.repo_id}{target}{include}{rev}"


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ConfigError("hf:// references need huggingface_hub: pip install 'flowkit[hub]'") from None
    return huggingface_hub


def _missing(ref: HubRef, why: str) -> CheckpointError:
    return CheckpointError(
        f"{ref}: {why} in the Hugging Face cache {cache_dir()}; fetch it where the hub can be reached with "
        f"`{fetch_command(ref)}` (same HF_HOME), or give a local path"
    )


def _download_file(hub: Any, ref: HubRef, local_only: bool) -> Path:
    return Path(hub.hf_hub_download(ref.repo_id, ref.path, revision=ref.revision, cache_dir=str(cache_dir()),
                                    local_files_only=local_only))


def _download_dir(hub: Any, ref: HubRef, local_only: bool) -> Path:
    patterns = [f"{ref.path}/*", f"{ref.path}/**"] if ref.path else None
    root = Path(hub.snapshot_download(ref.repo_id, revision=ref.revision, cache_dir=str(cache_dir()),
                                      allow_patterns=patterns, local_files_only=local_only))
    return root / ref.path if ref.path else root


def resolve(ref: str | os.PathLike[str], kind: Literal["file", "dir"] = "file") -> Path:
    """The local path of ``ref``: itself when it is not ``hf://``; else the cached file
    (``kind="file"``) or folder (``kind="dir"``; the repository's snapshot, or the
    folder ``PATH`` of it), fetched first when missing and the hub may be reached.

    Raises:
        ConfigError: a malformed reference; huggingface_hub not installed.
        CheckpointError: not in the cache while offline (HF_HUB_OFFLINE=1) or while the hub
            cannot be reached, or not in the repository: one line with the cache directory
            and the command that fetches it.
    """
    if not is_hub(ref):
        return Path(ref)
    parsed = parse(_text(ref))
    hub = _hub()
    errors = _hub_errors(hub)
    get = _download_dir if kind == "dir" or not parsed.path else _download_file
    try:
        found = get(hub, parsed, True)  # the cache first: nothing is contacted when it is there
        if found.exists():  # a cached snapshot may lack the folder asked for
            return found
    except errors["absent"]:
        pass
    if _offline():
        raise _missing(parsed, "not found (HF_HUB_OFFLINE=1: nothing is downloaded)")
    try:
        found = get(hub, parsed, False)
    except errors["absent"]:  # first: in some releases it subclasses the "not found" ones
        raise _missing(parsed, "not found and the hub cannot be reached") from None
    except errors["not_found"] as exc:
        raise CheckpointError(f"{parsed}: the hub has no such {'folder' if get is _download_dir else 'file'} "
                              f"({type(exc).__name__}); check OWNER/REPO, PATH and @REVISION") from None
    except errors["network"] as exc:
        raise _missing(parsed, f"not found and the hub cannot be reached ({type(exc).__name__})") from None
    if not found.exists():
        raise CheckpointError(f"{parsed}: the repository has no folder {parsed.path!r}; check PATH and @REVISION")
    return found


def _hub_errors(hub: Any) -> dict[str, tuple[type[BaseException], ...]]:
    """huggingface_hub's exception classes by what they mean here (names vary by release)."""
    from huggingface_hub import errors as e  # 0.23+

    def pick(*names: str) -> tuple[type[BaseException], ...]:
        return tuple(getattr(e, n) for n in names if isinstance(getattr(e, n, None), type))

    absent = pick("LocalEntryNotFoundError", "OfflineModeIsEnabled")
    not_found = pick("RepositoryNotFoundError", "RevisionNotFoundError", "RemoteEntryNotFoundError",
                     "EntryNotFoundError", "GatedRepoError")
    network: tuple[type[BaseException], ...] = (OSError, ConnectionError, TimeoutError)
    try:
        import requests

        network += (requests.RequestException,)
    except ImportError:
        pass
    try:
        import httpx

        network += (httpx.HTTPError,)
    except ImportError:
        pass
    return {"absent": absent, "not_found": not_found, "network": network}
