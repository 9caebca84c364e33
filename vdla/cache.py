"""The one build cache: every artefact vdla builds, verified before every use.

Where. One root for every cache, so that one variable moves or clears them
all: ``$VDLA_CACHE_DIR``, else ``~/.cache/vdla``, else (a read-only home) a
folder of this user's in the system's temporary directory. The tools vdla
runs keep their own caches (the WebAssembly Yosys behind Amaranth compiles
into wasmtime's cache under ``$XDG_CACHE_HOME``); `tool_cache_environment`
moves those under the same root whenever ``$VDLA_CACHE_DIR`` is set or the
home cache cannot be written.

What. `get_or_build` is the only way vdla stores a build: Verilog
(``verilog``), Verilator models (``rtl``, ``board``, ``cocotb``), CPU kernels
(``cpu``), GPU kernels and ptxas reports (``gpu/...``), synthesis reports and
Fmax records (``synth/...``). An entry is the folder ``<root>/<kind>/<key>``,
where the caller computes ``key`` from everything that determines the
artefact (`key_of`). Its guarantees:

* **Verified before every use.** A manifest written with the entry records
  the size and SHA-256 of each file the caller names; every `get_or_build`
  and `lookup` checks them (and the entry's kind and key) before handing the
  folder out, so a library is checked before ctypes loads it. A replaced,
  truncated or zeroed library, a truncated Verilog file or a lost manifest
  is never used.
* **Healed, not fatal.** A damaged entry is announced in one line, removed
  and built again.
* **Atomic, one builder.** A build runs in a private folder beside its
  entry and is renamed into place when complete, so no reader ever sees half
  an entry; it runs under an exclusive ``fcntl.flock`` on the key's lock
  file, so two processes never build the same entry at once (the second
  waits and takes the first one's entry). A process killed mid-build leaves
  its folder behind; the next build of that kind removes every folder whose
  key nobody holds the lock of.

The checks guard against damage and stale or foreign files; a user who can
write the cache while a library is being loaded can run code as that user
anyway. This module imports nothing heavy: the simulators ask for their
entries without loading Amaranth.

Size and pruning. `usage` sums the root by kind (`KINDS`: besides the
entries, the crash reports of ``crash/``, the sweep logs of ``dse/``, the
tools YoWASP compiled in ``yowasp/`` and wasmtime's cache in ``tools/``);
`prune` removes what was least recently used (an entry's folder is touched
each time it is handed out) by age or down to a size (``vdla cache``). It
removes only what it recognises as vdla's (an entry whose manifest names it,
the folder a killed build left, a file named as vdla or the tool names it),
so a root set to the wrong folder loses nothing else; an entry or build
folder whose lock is held (being built or healed) is left alone, and an
entry is removed as `get_or_build` removes a
damaged one: renamed aside first, so a reader sees it whole or not at all
(a library already loaded stays mapped). Fmax records (``synth/fmax``) are
measurements, an hour of place and route each, and are never pruned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from vdla.errors import VdlaError

__all__ = ["cache_root", "tool_cache_environment", "cpu_fingerprint", "CacheError", "Entry",
           "key_of", "get_or_build", "lookup", "entry_problem", "run_tool", "tool_failure",
           "MANIFEST_NAME", "BUILD_LOG", "KINDS", "Item", "Usage", "Pruned", "usage", "prune"]

MANIFEST_NAME = "manifest.json"
BUILD_LOG = "build.log"
# A manifest is a few kilobytes; a larger one is not vdla's and is not read.
MANIFEST_LIMIT = 1 << 20
# Part of every key: bump when the entry layout or manifest changes, so that
# vdla versions sharing one cache never read each other's entries.
FORMAT_VERSION = 1
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_BUILD_PREFIX, _DISCARD_PREFIX = ".build-", ".discard-"


class CacheError(VdlaError, OSError):
    """A cache entry cannot be written or removed, or a build left out a file it promised."""


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def _home_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_root() -> Path:
    """``$VDLA_CACHE_DIR``, or ``~/.cache/vdla`` when writable, or a temporary-folder default."""
    base = os.environ.get("VDLA_CACHE_DIR")
    if base:
        return Path(base)
    home = _home_cache() / "vdla"
    if _writable(home):
        return home
    return Path(tempfile.gettempdir()) / f"vdla-cache-{os.getuid()}"


@contextlib.contextmanager
def tool_cache_environment():
    """Within this block, tools started as subprocesses cache under `cache_root`.

    Sets ``XDG_CACHE_HOME`` (wasmtime's, hence Amaranth's Yosys's, cache
    location) to ``cache_root()/tools`` when ``$VDLA_CACHE_DIR`` is set or
    the usual cache folder cannot be written; otherwise changes nothing.
    """
    if not os.environ.get("VDLA_CACHE_DIR") and _writable(_home_cache()):
        yield
        return
    tools = cache_root() / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tools)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = previous


def cpu_fingerprint() -> str:
    """Digest of this CPU's model and feature flags (for ``-march=native`` builds)."""
    text = platform.machine() + platform.processor()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        text += "".join(sorted({line for line in lines
                                if line.startswith(("model name", "flags", "Features",
                                                    "CPU part"))}))
    except OSError:
        pass
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def key_of(*parts: str, length: int = 24) -> str:
    """A cache key: the first ``length`` hex digits of a digest of ``parts`` (in order).

    Each part is one thing the artefact depends on (a source text, a flag
    set, a tool version); `FORMAT_VERSION` is always among them.
    """
    digest = hashlib.sha256(f"vdla cache format {FORMAT_VERSION}".encode())
    for part in parts:
        digest.update(b"\0")
        digest.update(part.encode())
    return digest.hexdigest()[:length]


@dataclasses.dataclass(frozen=True)
class Entry:
    """A verified cache entry.

    Attributes
    ----------
    directory : Path
        The entry's folder; its files are ``directory / name``.
    key : str
    cached : bool
        True when the entry was found, False when this call built it.
    info : dict
        What the build function returned, as the manifest recorded it.
    """

    directory: Path
    key: str
    cached: bool
    info: dict


def _check_name(what: str, name: str, nested: bool = False) -> None:
    parts = name.split("/") if nested else [name]
    if not all(_NAME.fullmatch(part) for part in parts):
        raise ValueError(f"cache {what} {name!r}: expected letters, digits, '_', '-' and '.' "
                         f"(not first){', and / between parts' if nested else ''}")


def _sha256(path: Path) -> str:
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _read_manifest(directory: Path) -> dict | None:
    try:
        with open(directory / MANIFEST_NAME, "rb") as stream:
            text = stream.read(MANIFEST_LIMIT + 1)
        if len(text) > MANIFEST_LIMIT:
            return None
        manifest = json.loads(text)
        files = manifest["files"]
        if (not isinstance(files, dict) or not files or not isinstance(manifest["info"], dict)
                or not all(isinstance(name, str) and _NAME.fullmatch(name)
                           and isinstance(record, dict) for name, record in files.items())):
            return None
        return manifest
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _verified(directory: Path) -> dict | str:
    """The manifest of the entry ``directory`` when every file matches it, else the problem."""
    manifest = _read_manifest(directory)
    if manifest is None:
        return "its manifest is missing, unreadable or records no checksums"
    kind = manifest.get("kind")
    if manifest.get("key") != directory.name or not isinstance(kind, str) \
            or not directory.parent.as_posix().endswith("/" + kind):
        return "its manifest belongs to another entry"
    for name, record in manifest["files"].items():
        path = directory / name
        try:
            size = path.stat().st_size
            if size != record.get("bytes"):
                return f"{name} has {size} bytes, {record.get('bytes')} were built"
            if _sha256(path) != record.get("sha256"):
                return f"{name} does not match the checksum recorded at build time"
        except OSError as error:
            return f"{name} cannot be read ({error.strerror or error})"
    return manifest


def entry_problem(directory: Path) -> str | None:
    """What is wrong with the cache entry ``directory`` (None: every file matches its manifest).

    The manifest records each named file's size and SHA-256 when the entry
    was written: a truncated library would kill the loading process with
    SIGBUS, a replaced one would run whatever it holds.
    """
    checked = _verified(directory)
    return checked if isinstance(checked, str) else None


def _found(directory: Path) -> Entry | str:
    """The verified entry ``directory`` (found in the cache), or its problem; a found one
    is marked used now (its folder's time), for `prune`."""
    checked = _verified(directory)
    if isinstance(checked, str):
        return checked
    with contextlib.suppress(OSError):   # a read-only cache is used all the same
        os.utime(directory)
    return Entry(directory, directory.name, True, checked["info"])


def _say(line: str) -> None:
    print(f"vdla: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(lock: Path, blocking: bool = True):
    """Hold an exclusive flock on ``lock`` (yields False when not ``blocking`` and it is taken)."""
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_path(root: Path, key: str) -> Path:
    return root / f".{key}.lock"


def _remove(directory: Path, what: str, problem: str) -> None:
    """Remove an entry: renamed aside first, so a reader never sees a half-removed one."""
    aside = Path(tempfile.mkdtemp(dir=directory.parent,
                                  prefix=f"{_DISCARD_PREFIX}{directory.name}."))
    try:
        os.rename(directory, aside / "entry")
    except FileNotFoundError:
        pass
    except OSError as error:
        shutil.rmtree(aside, ignore_errors=True)
        raise CacheError(f"the cached {what} {directory} is {problem} and cannot be removed "
                         f"({error.strerror or error}); remove it with: rm -rf '{directory}'") \
            from None
    shutil.rmtree(aside, ignore_errors=True)


def _sweep(root: Path, held: str) -> None:
    """Remove the build and discard folders of killed processes: those whose key's lock is
    free, or is ``held`` by this caller (only a lock's holder builds or discards)."""
    for folder in root.iterdir():
        for prefix in (_BUILD_PREFIX, _DISCARD_PREFIX):
            if folder.name.startswith(prefix):
                key = folder.name[len(prefix):].rpartition(".")[0]
                if key == held:
                    shutil.rmtree(folder, ignore_errors=True)
                    continue
                with _locked(_lock_path(root, key), blocking=False) as free:
                    if free:
                        shutil.rmtree(folder, ignore_errors=True)


def lookup(kind: str, key: str, *, what: str | None = None,
           announce: Callable[[str], None] | None = None) -> Entry | None:
    """The verified entry ``kind``/``key``, or None when there is none (a damaged one is removed).

    Parameters are those of `get_or_build`.
    """
    _check_name("kind", kind, nested=True)
    _check_name("key", key)
    directory = cache_root() / kind / key
    if not directory.exists():
        return None
    found = _found(directory)
    if isinstance(found, Entry):
        return found
    with _locked(_lock_path(directory.parent, key)):
        if not directory.exists():   # removed by another process meanwhile
            return None
        found = _found(directory)
        if isinstance(found, Entry):   # rebuilt by another process meanwhile
            return found
        (announce or _say)(f"the cached {what or kind} {directory} is damaged ({found}); "
                           f"removing it")
        _remove(directory, what or kind, f"damaged ({found})")
    return None


def get_or_build(kind: str, key: str, build: Callable[[Path], dict | None], files: Iterable[str],
                 *, what: str | None = None, announce: Callable[[str], None] | None = None,
                 force: bool = False) -> Entry:
    """The entry ``<cache root>/kind/key``: verified if there, else built, recorded and published.

    Parameters
    ----------
    kind : str
        The artefact's kind, a folder of the cache root (``"rtl"``, ``"gpu/nvcc"``).
    key : str
        Names the entry; computed by the caller from everything the artefact
        depends on (`key_of`).
    build : callable
        ``build(folder)`` writes the artefact's files into the empty private
        ``folder``; whatever it returns (a JSON-able dict, or None) is kept
        in the manifest as `Entry.info`. It runs only when the entry is
        missing, damaged or ``force``\\ d, with the key's lock held.
    files : iterable of str
        Names of the files the build writes that are used later: each is
        recorded (size, SHA-256) and verified before every later use.
    what : str, optional
        The artefact, in words, for messages (default: ``kind``).
    announce : callable, optional
        Called with one line when a damaged entry is rebuilt (default: a line on stderr).
    force : bool
        Build again even when a valid entry exists.

    Returns
    -------
    Entry

    Raises
    ------
    CacheError
        When the build did not write one of ``files``, or a damaged entry
        cannot be removed. Whatever ``build`` raises passes through; nothing
        of a failed build stays in the cache.
    """
    _check_name("kind", kind, nested=True)
    _check_name("key", key)
    files = list(files)
    for name in files:
        _check_name("file name", name)
    what = what or kind
    root = cache_root() / kind
    directory = root / key
    # Entries are immutable once published, so a valid one is used without the lock.
    found = _found(directory) if not force and directory.exists() else None
    if isinstance(found, Entry):
        return found
    root.mkdir(parents=True, exist_ok=True)
    with _locked(_lock_path(root, key)):
        if directory.exists():
            found = _found(directory)
            if isinstance(found, Entry) and not force:
                return found   # another process built it meanwhile
            if isinstance(found, str):
                (announce or _say)(f"the cached {what} {directory} is damaged ({found}); "
                                   f"rebuilding it")
            _remove(directory, what, "to be rebuilt" if isinstance(found, Entry) else
                    f"damaged ({found})")
        _sweep(root, key)
        work = Path(tempfile.mkdtemp(dir=root, prefix=f"{_BUILD_PREFIX}{key}."))
        try:
            info = build(work) or {}
            if not isinstance(info, dict):
                raise TypeError(f"building the {what} {key} returned {type(info).__name__}, "
                                f"not a dict or None")
            records = {}
            for name in files:
                if not (work / name).is_file():
                    raise CacheError(f"building the {what} {key} wrote no {name}")
                records[name] = {"bytes": (work / name).stat().st_size,
                                 "sha256": _sha256(work / name)}
            manifest = {"kind": kind, "key": key, "files": records, "info": info,
                        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            text = json.dumps(manifest, indent=2) + "\n"
            (work / MANIFEST_NAME).write_text(text)
            os.rename(work, directory)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return Entry(directory, key, False, json.loads(text)["info"])   # as a later hit reads it


def tool_failure(what: str, returncode: int, output: str, *, command: list[str] | None = None,
                 tail_lines: int = 30) -> str:
    """The message for a tool that failed: its first error on the first line, its last lines after.

    The CLI reports the first line alone, so it names the tool's own
    complaint (the first line that mentions an error, else its last line)
    and never ends at a bare "last lines of the output:". ``command``, when
    given, is shown above the tail.
    """
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    shown = [f"$ {' '.join(command)}"] if command else []
    if not lines:
        return "\n".join([f"{what} failed (exit {returncode}) and printed nothing", *shown])
    first = next((line for line in lines if "error" in line.lower()), lines[-1]).strip()
    if len(first) > 300:
        first = first[:297] + "..."
    return "\n".join([f"{what} failed (exit {returncode}): {first}", *shown,
                      "last lines of the output:", *lines[-tail_lines:]])


def run_tool(command: list[str], work: Path, what: str, error: type[Exception], *,
             env: dict[str, str] | None = None, tail_lines: int = 30) -> str:
    """Run a build tool in ``work``; its output is returned and kept in ``work/build.log``.

    Raises
    ------
    error
        ``error(tool_failure(what, ...))`` when the tool exits non-zero.
    """
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    output = f"{result.stdout}\n{result.stderr}"
    (work / BUILD_LOG).write_text(f"$ {' '.join(command)}\n{output}")
    if result.returncode != 0:
        raise error(tool_failure(what, result.returncode, output, command=command,
                                 tail_lines=tail_lines))
    return output


# ------------------------------------------------------------------ size and pruning
# The folders of the cache root, what they hold.
KINDS = {
    "rtl": "RTL models (Verilator)",
    "board": "board models (Verilator)",
    "cocotb": "cocotb builds",
    "gate": "gate-level netlist simulations",
    "verilog": "Verilog",
    "synth": "synthesis reports, netlists, fit estimates, Fmax records",
    "cpu": "cpu target libraries",
    "gpu": "gpu target kernels, ptxas reports",
    "yowasp": "YoWASP's compiled tools",
    "tools": "the tools' own caches (wasmtime)",
    "crash": "crash reports",
    "dse": "dse sweep logs",
}
# Kept by `prune`: records of measurements, not builds.
_RECORDS = ("synth/fmax",)
# What `prune` recognises as vdla's outside the entries, by kind: (pattern of the path
# below the kind's folder, matched against each file).
_FILES = {
    "crash": re.compile(r"vdla-crash-[0-9-]+\.txt"),
    "dse": re.compile(r"[0-9a-f]{16}\.jsonl"),
    "yowasp": re.compile(r"yowasp_\w+/[\w.-]+\.wasm/[0-9a-f]{40}"),
    "tools": re.compile(r"wasmtime/.+"),
}


@dataclasses.dataclass(frozen=True)
class Item:
    """One thing `prune` may remove: an entry's folder, or a file.

    Attributes
    ----------
    kind : str
        Its folder of the root (a `KINDS` key).
    path : Path
    bytes : int
        Its size (every file's, links not followed).
    used : float
        When it was last used (seconds since the epoch): an entry's folder's
        time, a file's later of its access and modification times.
    entry : bool
        A `get_or_build` entry (removed under its key's lock, renamed aside first).
    build : bool
        The folder of a build or removal that never finished (its process was
        killed): removed under its key's lock, which a running build holds.
    """

    kind: str
    path: Path
    bytes: int
    used: float
    entry: bool
    build: bool = False


@dataclasses.dataclass(frozen=True)
class Usage:
    """The cache root's size by kind (`usage`).

    Attributes
    ----------
    root : Path
    kinds : dict of str to (int, int)
        Each folder of the root that holds anything: its bytes, and how many
        items `prune` could remove there (``other``: what is not vdla's).
    items : list of Item
        The removable items, least recently used first.
    """

    root: Path
    kinds: dict
    items: list

    @property
    def bytes(self) -> int:
        """The root's total size."""
        return sum(size for size, _ in self.kinds.values())


@dataclasses.dataclass(frozen=True)
class Pruned:
    """What `prune` removed (or, dry, would remove).

    Attributes
    ----------
    before : Usage
    removed : list of Item
    busy : list of Item
        Chosen, but left alone: their lock was held (being built or healed).
    dry_run : bool
    """

    before: Usage
    removed: list
    busy: list
    dry_run: bool

    @property
    def freed(self) -> int:
        return sum(item.bytes for item in self.removed)

    @property
    def after(self) -> int:
        """The root's size once the removed items are gone."""
        return self.before.bytes - self.freed


def _size(path: Path) -> int:
    """Bytes of the file or folder ``path``: its files' sizes (links not followed)."""
    if path.is_symlink() or not path.is_dir():
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _entries(folder: Path, kind: str):
    """The entries under ``folder`` (the kind ``kind``, or its sub-kinds'), as `Item`s."""
    for child in sorted(folder.iterdir()):
        if child.is_symlink() or not child.is_dir():
            continue   # lock files
        if child.name.startswith((_BUILD_PREFIX, _DISCARD_PREFIX)):
            yield Item(kind.split("/")[0], child, _size(child), child.lstat().st_mtime, False, True)
            continue
        if child.name.startswith("."):
            continue
        manifest = _read_manifest(child)
        if manifest is None:
            if not (child / MANIFEST_NAME).exists():
                yield from _entries(child, f"{kind}/{child.name}")   # a sub-kind
            continue
        if manifest.get("kind") != kind or manifest.get("key") != child.name or kind in _RECORDS:
            continue
        yield Item(kind.split("/")[0], child, _size(child), child.lstat().st_mtime, True)


def _files(folder: Path, kind: str):
    """The files of ``folder`` that `_FILES` names vdla's (or its tools'), as `Item`s."""
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent) / name
            if path.is_symlink() or not _FILES[kind].fullmatch(path.relative_to(folder).as_posix()):
                continue
            with contextlib.suppress(OSError):
                info = path.lstat()
                yield Item(kind, path, info.st_size, max(info.st_atime, info.st_mtime), False)


def usage() -> Usage:
    """The cache root's size by kind, and the items `prune` may remove.

    Returns
    -------
    Usage
        Every folder or file of the root counts: a folder of `KINDS` under its
        name, anything else as ``other``.
    """
    root = cache_root()
    kinds: dict[str, tuple[int, int]] = {}
    items: list[Item] = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            name = child.name if child.name in KINDS and child.is_dir() \
                and not child.is_symlink() else "other"
            found = []
            if name != "other":
                found = list((_files if name in _FILES else _entries)(child, name))
            size, count = kinds.get(name, (0, 0))
            kinds[name] = (size + _size(child), count + len(found))
            items += found
    items.sort(key=lambda item: item.used)
    return Usage(root, kinds, items)


def _item_lock(item: Item) -> Path | None:
    """The lock file guarding ``item`` (None: a plain file)."""
    if item.entry:
        return _lock_path(item.path.parent, item.path.name)
    if item.build:
        prefix = _BUILD_PREFIX if item.path.name.startswith(_BUILD_PREFIX) else _DISCARD_PREFIX
        return _lock_path(item.path.parent, item.path.name[len(prefix):].rpartition(".")[0])
    return None


def _remove_item(item: Item) -> bool:
    """Remove ``item``; False when its lock is held (being built or removed: left alone)."""
    lock = _item_lock(item)
    if lock is None:
        with contextlib.suppress(FileNotFoundError):
            item.path.unlink()
        return True
    with _locked(lock, blocking=False) as free:
        if free and item.entry:
            _remove(item.path, f"{item.kind} entry", "pruned")
        elif free:
            shutil.rmtree(item.path, ignore_errors=True)
        return free


def _busy(item: Item) -> bool:
    lock = _item_lock(item)
    if lock is None:
        return False
    with _locked(lock, blocking=False) as free:
        return not free


def prune(*, older_than: float | None = None, max_bytes: int | None = None,
          dry_run: bool = False, now: float | None = None) -> Pruned:
    """Remove what was not used for ``older_than`` seconds, then the least recently used
    items until the root holds at most ``max_bytes``.

    Parameters
    ----------
    older_than : float, optional
        Seconds since an item's last use beyond which it goes.
    max_bytes : int, optional
        The size to bring the root down to (what is not removable still counts).
    dry_run : bool
        Remove nothing; say what would go.
    now : float, optional
        The time ages are counted from (default: now).

    Returns
    -------
    Pruned
    """
    before = usage()
    now = time.time() if now is None else now
    old = [older_than is not None and now - item.used > older_than for item in before.items]
    left = before.bytes - sum(item.bytes for item, go in zip(before.items, old) if go)
    chosen = []
    for item, go in zip(before.items, old):   # least recently used first
        if not go and max_bytes is not None and left > max_bytes:
            go, left = True, left - item.bytes
        if go:
            chosen.append(item)
    removed, busy = [], []
    for item in chosen:
        if _busy(item) if dry_run else not _remove_item(item):
            busy.append(item)
        else:
            removed.append(item)
    return Pruned(before, removed, busy, dry_run)
