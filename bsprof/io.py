"""Every file bsprof writes goes through here: one output policy, so nothing the user had is lost.

The policy, by what is at the output path now:

- nothing, or a regular file: write a temporary file beside it and rename it over the path, so the
  path holds the old content or the whole new one, never half of either (an existing file keeps
  its permission bits). A single output file the user names (:func:`write_output_file`: the
  report page, the sweep figure) goes only over an empty file or one bsprof wrote (it carries
  :data:`BSPROF_MARK` in its head); any other file is refused and stays as it was;
- a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe), or a descriptor
  path (``/dev/fd/N``, ``/proc/self/fd/N``): write through it, in place; it is never replaced;
- a symbolic link: the link stays; what it points to is written by the rules above (a dangling
  link gets its target created);
- a directory, socket or block device: refused.

A missing parent directory is made only when its own parent is an existing writable directory:
one level, so a typo in a path is refused rather than built out (:func:`check_output_file` and
:func:`check_output_dir` say so before a verb does any work). Every failure is a :class:`BsprofError` naming the path and the cause (exit code 2).

Inputs come xz-compressed too (``X.ncu-rep.xz``, ``X.cubin.xz``, ``X.sass.xz``: how reports and
foreign cubins are shipped), while the tools that read them (ncu_report, nvdisasm, cuobjdump) take
only a plain file: :func:`unpacked` writes each once into the user's cache, by this policy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from bsprof.errors import BsprofError

_DESCRIPTOR_PATHS = ("/dev/stdout", "/dev/stderr")

# Put in the <head> of every HTML page bsprof writes: how the output policy knows a file at the
# output path is bsprof's own (safe to replace) rather than something of the user's.
BSPROF_MARK = '<meta name="generator" content="bsprof">'
# the mark sits in the first few hundred bytes of a page; reading more would only cost time
_MARK_WINDOW = 8192
# a report page written before the mark existed is known by its default title, so re-running the
# README's `bsprof report -o bsprof-report.html` over one still replaces it
_OLD_REPORT_TITLE = b"<title>bsprof report: "
_DESCRIPTOR_DIRS = ("/dev/fd/", "/proc/self/fd/")


def _cause(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, "") or type(exc).__name__


def _fail(path: Path | str, exc: OSError, what: str = "cannot write") -> BsprofError:
    return BsprofError(f"{what} {path} ({_cause(exc)}); pick a writable output path")


def _kind(dest: Path) -> tuple[str, Path]:
    """('file' | 'stream', the path to write): what the policy does with ``dest``."""
    text = str(dest)
    if text in _DESCRIPTOR_PATHS or text.startswith(_DESCRIPTOR_DIRS):
        return "stream", dest
    try:
        st = os.stat(dest)  # follows links: a link's target decides
    except FileNotFoundError:
        # absent, or a dangling link: create what the link names, keep the link
        return "file", Path(os.path.realpath(dest)) if os.path.islink(dest) else dest
    except OSError as exc:
        raise _fail(dest, exc) from None
    if stat.S_ISREG(st.st_mode):
        return "file", Path(os.path.realpath(dest)) if os.path.islink(dest) else dest
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return "stream", dest
    what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
            else "a block device" if stat.S_ISBLK(st.st_mode) else "not a regular file")
    raise BsprofError(f"{dest} is {what}; give a file path (bsprof writes regular files, character "
                      "devices and FIFOs only)")


def _missing_dir_problem(path: Path, *, parents: bool = False) -> str | None:
    """Why ``path`` (absent) cannot be made as a directory under the policy, or None if it can.

    Only one level is made (``parents`` lifts that for bsprof's own cache)."""
    anc = path.parent
    if parents:
        while not anc.exists() and anc != anc.parent:
            if anc.is_symlink():
                return f"{anc} is a dangling link; fix it or give another output path"
            anc = anc.parent
    elif anc.is_symlink() and not anc.exists():
        return f"{anc} is a dangling link; fix it or give another output path"
    if not anc.exists():
        return (f"cannot make {path}: {anc} does not exist (bsprof makes only the last directory of a "
                "path); make it first or give another output path")
    if not anc.is_dir():
        return f"cannot make {path}: {anc} is not a directory; give another output path"
    if not os.access(anc, os.W_OK | os.X_OK):
        return f"cannot make {path}: {anc} is not writable; give another output path"
    return None


def check_output_dir(path: str | os.PathLike, *, parents: bool = False) -> Path:
    """Refuse now what :func:`ensure_dir` would refuse later: ``path`` must be a directory, or be
    makeable by the policy. Makes nothing; a verb calls it before any work."""
    path = Path(path)
    if path.is_dir():
        return path
    if path.exists() or path.is_symlink():
        raise BsprofError(f"{path} is not a directory; give a directory path (or remove what is there)")
    problem = _missing_dir_problem(path, parents=parents)
    if problem:
        raise BsprofError(problem)
    return path


def ensure_dir(path: str | os.PathLike, *, parents: bool = False) -> Path:
    """``path`` as an existing directory: made only when its parent is an existing writable
    directory (``parents=True``, for bsprof's own cache: with its missing ancestors)."""
    path = check_output_dir(path, parents=parents)
    if path.is_dir():
        return path
    try:
        path.mkdir(parents=parents, exist_ok=True)
    except OSError as exc:
        raise _fail(path, exc, "cannot make directory") from None
    return path


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)  # keep an existing file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _own(exc: OSError, *paths: Path) -> bool:
    """Did this error come from writing one of ``paths`` (or carry no path at all: ENOSPC, EIO)?"""
    names = {str(p) for p in paths}
    return exc.filename is None or str(exc.filename) in names


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success its content lands at ``dest`` by the policy
    above (renamed over a regular file, copied through a device or FIFO).

    On an exception the temporary file is removed and ``dest`` keeps what it had.
    """
    dest = Path(dest)
    kind, target = _kind(dest)
    if kind == "stream":
        with tempfile.TemporaryDirectory(prefix="bsprof-out-") as tmpdir:
            tmp_path = Path(tmpdir) / "out"
            try:
                yield tmp_path
                with open(tmp_path, "rb") as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            except OSError as exc:
                if not _own(exc, tmp_path, dest):
                    raise
                raise _fail(dest, exc) from None
        return
    ensure_dir(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:200]}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _fail(dest, exc) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        # mkstemp makes the file owner-only; give it the mode the file had or a plain open() gives
        os.chmod(tmp_path, _mode_for(target))
        yield tmp_path
        os.replace(tmp_path, target)
    except OSError as exc:
        if not _own(exc, tmp_path, target, dest):
            raise
        raise _fail(dest, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp_path.unlink()


def _write(dest: str | os.PathLike, data: str | bytes) -> Path:
    dest = Path(dest)
    text = isinstance(data, str)
    if _kind(dest)[0] == "stream":
        try:
            with open(dest, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as fh:
                fh.write(data)
        except OSError as exc:
            raise _fail(dest, exc) from None
        return dest
    with atomic_path(dest) as tmp:
        if text:
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return dest


def write_bytes_atomic(dest: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``dest`` by the output policy; returns ``dest``."""
    return _write(dest, data)


def write_text_atomic(dest: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``dest`` by the output policy; returns ``dest``."""
    return _write(dest, text)


def _is_own(path: Path) -> bool:
    """Empty, or a file bsprof wrote: its head carries :data:`BSPROF_MARK`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_MARK_WINDOW)
    except OSError as exc:
        raise BsprofError(f"cannot read {path} to see what it is ({_cause(exc)}); give another output path") from None
    return not head or BSPROF_MARK.encode() in head or _OLD_REPORT_TITLE in head


def check_output_file(dest: str | os.PathLike) -> Path:
    """Refuse now what :func:`write_output_file` would refuse: a directory, a socket, a regular
    file that is neither empty nor bsprof's own, a parent that cannot be made. Writes nothing;
    a verb calls it before any work. Returns ``dest``."""
    dest = Path(dest)
    kind, target = _kind(dest)
    if kind == "stream":
        return dest
    if target.is_file():
        if not _is_own(target):
            shown = dest if target == dest else f"{dest} (a link to {target})"
            raise BsprofError(f"{shown} exists and was not written by bsprof; give a new path or remove it")
        return dest
    check_output_dir(target.parent)
    return dest


def write_output_file(dest: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to a single output file the user named (an HTML page carrying
    :data:`BSPROF_MARK`), by the policy: never over a file that is not empty and not bsprof's own.
    Returns ``dest``."""
    check_output_file(dest)
    return _write(dest, text)


def _run_dir_parts(parent: str | os.PathLike, name: str, fallback: str) -> tuple[Path, str]:
    parent = Path(parent)
    if name in ("", ".", ".."):
        parent, name = parent / name, fallback
    if "/" in name or "\0" in name:
        raise BsprofError(f"{name!r} is not a directory name; give a plain name without '/'")
    return parent, name


def check_unique_dir(parent: str | os.PathLike, name: str, *, fallback: str = "bsprof-out") -> None:
    """Refuse now what :func:`unique_dir` would refuse later (a verb calls it before any work)."""
    check_output_dir(_run_dir_parts(parent, name, fallback)[0])


def unique_dir(parent: str | os.PathLike, name: str, *, fallback: str = "bsprof-out") -> Path:
    """Create and return ``parent/name`` (or ``name-2``, ``name-3``…): never reuse an existing run
    directory. A ``name`` that names no new entry (``""``, ``.``, ``..``: from ``-o .``) means a
    fresh ``fallback`` directory inside ``parent/name``."""
    parent, name = _run_dir_parts(parent, name, fallback)
    ensure_dir(parent)
    for i in range(1, 10_000):
        cand = parent / (name if i == 1 else f"{name}-{i}")
        try:
            cand.mkdir()
            return cand
        except FileExistsError:
            continue
        except OSError as exc:
            raise _fail(cand, exc, "cannot make directory") from None
    raise BsprofError(f"{parent} already holds {name} … {name}-9999; clean it up or give another directory")


XZ_MAGIC = b"\xfd7zXZ\x00"


def is_xz(path: str | os.PathLike) -> bool:
    """Named ``*.xz`` or starting with the xz magic (a renamed file is read by what it holds)."""
    path = Path(path)
    if path.name.endswith(".xz"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(len(XZ_MAGIC)) == XZ_MAGIC
    except OSError:
        return False


def cache_dir(*parts: str) -> Path:
    """bsprof's own cache directory ``parts`` under ``$BSPROF_CACHE`` (default
    ``$XDG_CACHE_HOME/bsprof``, then ``~/.cache/bsprof``), made with every missing ancestor.

    A cache is not a user output path: no one chose it, so the output policy's one-level rule
    (which stops a typo being built out) does not apply, and a fresh home has no ``~/.cache``."""
    root = os.environ.get("BSPROF_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = os.path.join(xdg, "bsprof") if xdg and os.path.isabs(xdg) else \
            os.path.join(os.path.expanduser("~"), ".cache", "bsprof")
    path = Path(root, *parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BsprofError(f"cannot make bsprof's cache directory {path} ({_cause(exc)}); "
                          "set BSPROF_CACHE to a writable directory") from None
    return path


def unpacked(path: str | os.PathLike) -> Path:
    """``path`` itself, or for an xz file its content unpacked once into :func:`cache_dir` ``xz``,
    keyed by the compressed file's path, size and mtime, under its own name less ``.xz``
    (nvdisasm's messages then name a file the user recognises). Messages about the
    input should still name ``path``: the unpacked copy is an implementation detail."""
    import hashlib
    import lzma

    path = Path(path)
    if not is_xz(path):
        return path
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache_dir("xz", key) / (path.name.removesuffix(".xz") or "unpacked")
    if out.is_file():
        return out
    try:
        data = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as exc:
        raise BsprofError(f"{path}: an xz file that does not decompress ({exc}); re-download or re-compress it") from None
    write_bytes_atomic(out, data)
    return out
