"""Every file bsprof writes goes through here, and every input it reads is opened here: one output
policy, so nothing the user had is lost, and one input policy, so no input hangs or exhausts memory.

The output policy, by what is at the output path now:

- nothing, or a regular file: write a temporary file beside it and rename it over the path, so the
  path holds the old content or the whole new one, never half of either (an existing file keeps
  its permission bits). A single output file the user names (:func:`write_output_file`: the
  report page, the sweep figure) goes only over an empty file or a page bsprof wrote (an HTML
  document with :data:`BSPROF_MARK` in its head), and that is decided when the new file takes the
  path, not only before the work: the rename is a no-replace rename where the path was free, and
  an exchange where it held bsprof's page, undone when what was swapped out is not bsprof's (so a
  file created at the path while the page was built is never replaced);
- a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe), or a descriptor
  path (``/dev/fd/N``, ``/proc/self/fd/N``): write through it, in place; it is never replaced;
- a symbolic link: the link stays; what it points to is written by the rules above (a dangling
  link gets its target created);
- a directory, socket or block device: refused.

A results directory (:func:`results_dir`) is built as a hidden temporary directory beside its
final name and renamed into place whole, without replacing anything: an interrupted verb leaves
no half-written directory.

A missing parent directory is made only when its own parent is an existing writable directory:
one level, so a typo in a path is refused rather than built out (:func:`check_output_file` and
:func:`check_output_dir` say so before a verb does any work). Every failure is a :class:`BsprofError` naming the path and the cause (exit code 2).

Inputs come xz-compressed too (``X.ncu-rep.xz``, ``X.cubin.xz``, ``X.sass.xz``: how reports and
foreign cubins are shipped), while the tools that read them (ncu_report, nvdisasm, cuobjdump) take
only a plain file: :func:`unpacked` writes each once into the user's cache, by this policy.

The input policy (:func:`open_input`, :func:`read_input_bytes`): an input must be a regular file;
a FIFO, a device, a socket or a directory is refused before anything is read (a named pipe would
block forever), and so is an input larger than ``BSPROF_MAX_INPUT_BYTES`` (default 16 GiB). An xz
input unpacks as a stream, up to the same cap and to ``BSPROF_MAX_XZ_RATIO`` (default 1000) times
its compressed size (the shipped reports and cubins unpack 10-45x; a compression bomb is refused
after a few hundred MB, not after filling the disk).
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
# a report page written before the mark existed is known by its default title and the page's own
# stylesheet in its head (the rule for its console element), so re-running the README's
# `bsprof report -o bsprof-report.html` over one still replaces it; a user's page with that title
# alone is not one
_OLD_REPORT_TITLE = "bsprof report: "
_OLD_REPORT_STYLE = "#bsprof-console"
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
    what = (
        "a directory"
        if stat.S_ISDIR(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a block device"
        if stat.S_ISBLK(st.st_mode)
        else "not a regular file"
    )
    raise BsprofError(
        f"{dest} is {what}; give a file path (bsprof writes regular files, character devices and FIFOs only)"
    )


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
        return (
            f"cannot make {path}: {anc} does not exist (bsprof makes only the last directory of a "
            "path); make it first or give another output path"
        )
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
        # the results land in it (a hidden directory, then a rename): refused now, not after the work
        if not os.access(path, os.W_OK | os.X_OK):
            raise BsprofError(f"{path} is not writable; give another output directory")
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
        return 0o666 & ~_umask()


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _own(exc: OSError, *paths: Path) -> bool:
    """Did this error come from writing one of ``paths`` (or carry no path at all: ENOSPC, EIO)?"""
    names = {str(p) for p in paths}
    return exc.filename is None or str(exc.filename) in names


# ---------------------------------------------------------------------------------------------
# Renames that decide at the rename itself: renameat2(2) where the kernel, libc and filesystem
# have it, honest fallbacks where not.

_RENAME_NOREPLACE = 1  # linux/fs.h
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2_fn = None  # the libc function once looked up; False where there is none


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(src, dst, flags): True when done; False where this system has no renameat2 or the
    filesystem does not take ``flags`` (the caller falls back); an OSError for any other failure
    (FileExistsError: ``dst`` is taken)."""
    global _renameat2_fn
    import ctypes

    if _renameat2_fn is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2_fn = fn
        except (OSError, AttributeError):
            _renameat2_fn = False
    if _renameat2_fn is False:
        return False
    if _renameat2_fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def rename_noreplace(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Move ``src`` (a file or a directory) to ``dst`` only while ``dst`` is free: FileExistsError
    when something is there, which stays as it was.

    Without renameat2: a file is hard-linked (link(2) never replaces) and its temporary name
    removed; a directory is renamed (rename(2) moves a directory over nothing or an empty
    directory only, so nothing is lost); on a filesystem without hard links a file is renamed after
    a last look (the one window left: the rename call itself)."""
    src, dst = Path(src), Path(dst)
    if _renameat2(src, dst, _RENAME_NOREPLACE):
        return
    if src.is_dir() and not src.is_symlink():
        try:
            os.rename(src, dst)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from None
            raise
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from None
        os.rename(src, dst)
        return
    os.unlink(src)


class _Kept(Exception):
    """The temporary file now holds the user's file: it must not be removed."""


def _land_page(tmp: Path, target: Path, dest: Path) -> None:
    """Put ``tmp`` at ``target`` only over nothing, an empty file or a page bsprof wrote, judged when
    the page takes the path: a file that appeared at the path after the first check (or changed
    into something of the user's) is never replaced."""
    for _attempt in range(5):
        try:
            rename_noreplace(tmp, target)
            return
        except FileExistsError:
            pass
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            continue  # gone again: try the no-replace rename once more
        if not stat.S_ISREG(st.st_mode):
            raise BsprofError(
                f"{dest} was replaced by something that is not a regular file while bsprof wrote "
                "it; left as it is, give another output path"
            )
        try:
            exchanged = _renameat2(tmp, target, _RENAME_EXCHANGE)
        except FileNotFoundError:
            continue
        if exchanged:
            # the page holds the path now and what held it sits at tmp: judge that, swap back if not
            # ours. Until it is judged ours, tmp holds the user's file, and atomic_path removes tmp on
            # any exception: a file that cannot be read (or an interrupt while it is read) swaps back too.
            try:
                own = _is_own(tmp)
            except BsprofError:
                own = False  # unreadable, or no longer a regular file: not known to be bsprof's
            except BaseException:
                if not _renameat2(tmp, target, _RENAME_EXCHANGE):
                    raise _Kept(f"{dest}: interrupted while bsprof wrote it; your file is at {tmp}; move it back")
                raise
            if own:
                return
            if _renameat2(tmp, target, _RENAME_EXCHANGE):
                raise _not_bsprofs(dest, target)
            raise _Kept(
                f"{dest} was created while bsprof wrote it, and could not be swapped back: "
                f"your file is at {tmp}; move it back"
            )
        # no exchange here: judge the file by its identity and content, then replace only that file
        before = _identity(target)
        if not _is_own(target):
            raise _not_bsprofs(dest, target)
        if _identity(target) != before:
            continue  # it changed while being judged: judge again
        os.replace(tmp, target)
        return
    raise BsprofError(f"{dest} keeps changing while bsprof writes it; give an output path nothing else writes")


def _identity(path: Path) -> tuple[int, ...]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _not_bsprofs(dest: Path, target: Path) -> BsprofError:
    shown = dest if target == dest else f"{dest} (a link to {target})"
    return BsprofError(f"{shown} exists and was not written by bsprof; give a new path or remove it")


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, *, guarded: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success its content lands at ``dest`` by the policy
    above (renamed over a regular file, copied through a device or FIFO). ``guarded``: land only
    over nothing, an empty file or a page bsprof wrote, judged at the rename (:func:`_land_page`).

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
    keep = False
    try:
        # mkstemp makes the file owner-only; give it the mode the file had or a plain open() gives
        os.chmod(tmp_path, _mode_for(target))
        yield tmp_path
        if guarded:
            _land_page(tmp_path, target, dest)
        else:
            os.replace(tmp_path, target)
    except _Kept as exc:
        keep = True
        raise BsprofError(str(exc)) from None
    except OSError as exc:
        if not _own(exc, tmp_path, target, dest):
            raise
        raise _fail(dest, exc) from None
    finally:
        if not keep:
            with contextlib.suppress(OSError):
                tmp_path.unlink()


def _write(dest: str | os.PathLike, data: str | bytes, guarded: bool = False) -> Path:
    dest = Path(dest)
    text = isinstance(data, str)
    if _kind(dest)[0] == "stream":
        try:
            with open(dest, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as fh:
                fh.write(data)
        except OSError as exc:
            raise _fail(dest, exc) from None
        return dest
    with atomic_path(dest, guarded=guarded) as tmp:
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


# elements a document's head holds; any other element (or text) means the head has ended
_HEAD_ELEMENTS = frozenset({"meta", "title", "link", "style", "script", "base", "noscript", "template"})


def _is_bsprof_page(head: str) -> bool:
    """Is ``head`` (the start of a file) an HTML document with :data:`BSPROF_MARK` in its head?

    Parsed, not searched: the document must begin as HTML (a doctype or ``<html>``/``<head>``, after
    whitespace and comments) and the mark must be a ``<meta>`` element of its head, so a README or a
    notes file that merely quotes the mark is no page of bsprof's."""
    import re
    from html.parser import HTMLParser

    text = head.lstrip("\ufeff \t\r\n\f")
    while text.startswith("<!--"):
        end = text.find("-->", 4)
        if end < 0:
            return False
        text = text[end + 3 :].lstrip(" \t\r\n\f")
    if not re.match(r"<!doctype\s+html[\s>]|<html[\s>]|<head[\s>]", text, re.I):
        return False

    class Head(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.where = "prolog"  # prolog (before <head>) -> head -> done
            self.raw: str | None = None  # inside <title>, <script> or <style>
            self.text = ""  # of the <title> or <style> being read
            self.old_title = self.old_style = False
            self.own = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if self.where == "done":
                return
            if self.where == "prolog":
                self.where = "prolog" if tag == "html" else "head" if tag == "head" else "done"
                return
            if tag not in _HEAD_ELEMENTS:
                self.where = "done"
                return
            a = {k.lower(): (v or "") for k, v in attrs}
            if tag == "meta" and a.get("name", "").lower() == "generator" and a.get("content", "").strip() == "bsprof":
                self.own, self.where = True, "done"
            elif tag in ("title", "script", "style"):
                self.raw, self.text = tag, ""

        def handle_endtag(self, tag: str) -> None:
            if self.where != "head":
                return
            if tag == self.raw:
                if tag == "title":
                    self.old_title = self.old_title or self.text.startswith(_OLD_REPORT_TITLE)
                elif tag == "style":
                    self.old_style = self.old_style or _OLD_REPORT_STYLE in self.text
                if self.old_title and self.old_style:
                    self.own, self.where = True, "done"
                self.raw = None
            elif tag == "head":
                self.where = "done"

        def handle_data(self, data: str) -> None:
            if self.raw in ("title", "style"):
                self.text += data
            elif self.raw is None and data.strip() and self.where != "done":
                self.where = "done"  # text outside an element: the body has begun

        def handle_decl(self, decl: str) -> None:
            if self.where != "prolog" or not decl.lower().startswith("doctype"):
                self.where = "done"

    parser = Head()
    parser.feed(text)
    return parser.own


def _is_own(path: Path) -> bool:
    """Empty, or a page bsprof wrote (an HTML document with :data:`BSPROF_MARK` in its head)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return False
            head = fh.read(_MARK_WINDOW)
    except OSError as exc:
        raise BsprofError(f"cannot read {path} to see what it is ({_cause(exc)}); give another output path") from None
    return not head or _is_bsprof_page(head.decode("utf-8", errors="replace"))


def check_output_file(dest: str | os.PathLike) -> Path:
    """Refuse now what :func:`write_output_file` would refuse: a directory, a socket, a regular
    file that is neither empty nor bsprof's own, a parent that cannot be made. Writes nothing;
    a verb calls it before any work (the write judges the path again when the page lands).
    Returns ``dest``."""
    dest = Path(dest)
    kind, target = _kind(dest)
    if kind == "stream":
        return dest
    if target.is_file():
        if not _is_own(target):
            raise _not_bsprofs(dest, target)
        return dest
    check_output_dir(target.parent)
    return dest


def write_output_file(dest: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to a single output file the user named (an HTML page carrying
    :data:`BSPROF_MARK`), by the policy: never over a file that is not empty and not bsprof's own,
    judged before the work and again when the page takes the path. Returns ``dest``."""
    check_output_file(dest)
    return _write(dest, text, guarded=True)


def _run_dir_parts(parent: str | os.PathLike, name: str, fallback: str) -> tuple[Path, str]:
    parent = Path(parent)
    if name in ("", ".", ".."):
        parent, name = parent / name, fallback
    if "/" in name or "\0" in name:
        raise BsprofError(f"{name!r} is not a directory name; give a plain name without '/'")
    return parent, name


def check_unique_dir(parent: str | os.PathLike, name: str, *, fallback: str = "bsprof-out") -> None:
    """Refuse now what :func:`results_dir` would refuse later (a verb calls it before any work)."""
    check_output_dir(_run_dir_parts(parent, name, fallback)[0])


_MAX_RUN_DIRS = 10_000


class Staged:
    """A results directory being written: ``path`` is the hidden directory to fill while the block
    runs, and where the directory landed after it."""

    def __init__(self, path: Path) -> None:
        self.path = path


@contextlib.contextmanager
def results_dir(parent: str | os.PathLike, name: str, *, fallback: str = "bsprof-out") -> Iterator[Staged]:
    """A fresh results directory ``parent/name`` (or ``name-2``, ``name-3``…: an existing run
    directory is never reused) that appears whole or not at all. A ``name`` that names no new entry
    (``""``, ``.``, ``..``: from ``-o .``) means a fresh ``fallback`` directory inside ``parent/name``.

    The block fills ``staged.path``, a hidden directory beside the final name; when it ends, the
    directory is renamed into place without replacing anything, and ``staged.path`` becomes the
    final path. An exception (an interrupt too) removes the hidden directory: nothing half-written
    is left at the final name."""
    parent, name = _run_dir_parts(parent, name, fallback)
    ensure_dir(parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name[:100]}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise _fail(parent / name, exc, "cannot make directory") from None
    staged = Staged(tmp)
    try:
        yield staged
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it owner-only; a results directory gets mkdir's mode
        for i in range(1, _MAX_RUN_DIRS):
            cand = parent / (name if i == 1 else f"{name}-{i}")
            try:
                rename_noreplace(tmp, cand)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _fail(cand, exc, "cannot make directory") from None
            staged.path = cand
            return
        raise BsprofError(f"{parent} already holds {name} … {name}-9999; clean it up or give another directory")
    finally:
        if staged.path == tmp:  # not landed: take the hidden directory back (after a landing it is gone)
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The input policy

_GiB = 1 << 30
# Above every real input (a 2 GB .ncu-rep, a 200 MB cubin, a 1 GB timing table); a user with a
# bigger one raises it.
DEFAULT_MAX_INPUT_BYTES = 16 * _GiB
# The shipped reports and cubins unpack to 10-45x their xz size; a compression bomb to 1,000x and far more.
DEFAULT_MAX_XZ_RATIO = 1000
# a small xz file may unpack to this much whatever its ratio (a listing of repeated lines)
_XZ_FLOOR_BYTES = 64 << 20


def env_limit(name: str, default: int) -> int:
    """The positive whole number in environment variable ``name``, or ``default`` when unset."""
    raw = os.environ.get(name, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise BsprofError(
            f"{name}={os.environ[name]!r} is not a positive whole number; set it to a count "
            f"such as {default} or unset it"
        )
    return int(raw)


def max_input_bytes() -> int:
    """The largest input bsprof reads (``BSPROF_MAX_INPUT_BYTES``), raw or unpacked."""
    return env_limit("BSPROF_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES)


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def too_large(path: str | os.PathLike, size: int | str, cap: int, var: str = "BSPROF_MAX_INPUT_BYTES") -> BsprofError:
    shown = human_bytes(size) if isinstance(size, int) else size
    # the suggested limit must admit this input: four times the cap can still be below its size
    raised = max(cap * 4, size * 2) if isinstance(size, int) else cap * 4
    return BsprofError(
        f"{path}: {shown} is over bsprof's input limit of {human_bytes(cap)}; if the input is real, "
        f"raise the limit (export {var}={raised})"
    )


def _not_regular(path: Path, mode: int) -> str:
    if stat.S_ISDIR(mode):
        return f"{path}: a directory, not a file; give a file"
    what = (
        "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a file"
    )
    return (
        f"{path}: {what}, not a regular file; bsprof reads inputs from regular files only (copy it into a file first)"
    )


def open_input(
    path: str | os.PathLike, *, fix: str = "", limit: int | None = None, var: str = "BSPROF_MAX_INPUT_BYTES"
):
    """``path`` opened for reading (binary) when it is a readable regular file within the input
    limit (``limit``, default :func:`max_input_bytes`); otherwise one BsprofError naming the real
    problem (no such file, permission denied, a FIFO or device, too large: ``var`` names the
    variable that raises ``limit``) and ``fix``.

    A FIFO or device is refused from its metadata, before it is opened for reading; the open itself
    never blocks (O_NONBLOCK) and is checked again, so a file swapped for a FIFO meanwhile is refused too."""
    path = Path(path)
    tail = f"; {fix}" if fix else ""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise BsprofError(_not_regular(path, st.st_mode))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise BsprofError(f"{path}: a link to {os.readlink(path)}, which does not exist{tail}") from None
        raise BsprofError(f"{path}: no such file{tail}") from None
    except PermissionError:
        raise BsprofError(
            f"{path}: cannot read it (permission denied); check its permissions "
            f"(chmod u+r) or copy it somewhere readable"
        ) from None
    except OSError as exc:
        raise BsprofError(f"{path}: cannot open it ({_cause(exc)}){tail}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BsprofError(_not_regular(path, st.st_mode))
        cap = max_input_bytes() if limit is None else limit
        if st.st_size > cap:
            raise too_large(path, st.st_size, cap, var)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_input(path: str | os.PathLike, *, fix: str = "", limit: int | None = None) -> int:
    """Refuse what :func:`open_input` refuses, reading nothing; returns the file's size."""
    with open_input(path, fix=fix, limit=limit) as fh:
        return os.fstat(fh.fileno()).st_size


def read_input_bytes(
    path: str | os.PathLike, *, fix: str = "", limit: int | None = None, var: str = "BSPROF_MAX_INPUT_BYTES"
) -> bytes:
    """The whole content of an input file, by :func:`open_input` (a file that grows past the limit
    while read is refused too)."""
    cap = max_input_bytes() if limit is None else limit
    with open_input(path, fix=fix, limit=cap, var=var) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise too_large(path, f"more than {human_bytes(cap)}", cap, var)
    return data


XZ_MAGIC = b"\xfd7zXZ\x00"


def is_xz(path: str | os.PathLike) -> bool:
    """Named ``*.xz`` or starting with the xz magic (a renamed file is read by what it holds)."""
    path = Path(path)
    if path.name.endswith(".xz"):
        return True
    try:
        with open_input(path) as fh:  # never opens a FIFO for reading: it would block
            return fh.read(len(XZ_MAGIC)) == XZ_MAGIC
    except BsprofError:
        return False


def cache_dir(*parts: str) -> Path:
    """bsprof's own cache directory ``parts`` under ``$BSPROF_CACHE`` (default
    ``$XDG_CACHE_HOME/bsprof``, then ``~/.cache/bsprof``), made with every missing ancestor.

    A cache is not a user output path: no one chose it, so the output policy's one-level rule
    (which stops a typo being built out) does not apply, and a fresh home has no ``~/.cache``."""
    root = os.environ.get("BSPROF_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (
            os.path.join(xdg, "bsprof")
            if xdg and os.path.isabs(xdg)
            else os.path.join(os.path.expanduser("~"), ".cache", "bsprof")
        )
    path = Path(root, *parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BsprofError(
            f"cannot make bsprof's cache directory {path} ({_cause(exc)}); set BSPROF_CACHE to a writable directory"
        ) from None
    return path


def unpacked(path: str | os.PathLike) -> Path:
    """``path`` itself, or for an xz file its content unpacked once into :func:`cache_dir` ``xz``,
    keyed by the compressed file's path, size and mtime, under its own name less ``.xz``
    (nvdisasm's messages then name a file the user recognises). Messages about the
    input should still name ``path``: the unpacked copy is an implementation detail.

    The content is unpacked as a stream (memory stays flat), up to :func:`max_input_bytes` and
    ``BSPROF_MAX_XZ_RATIO`` times the compressed size; past either the partial copy is removed and
    the input refused, one line."""
    import hashlib

    path = Path(path)
    if not is_xz(path):
        return path
    with open_input(path) as src:
        st = os.fstat(src.fileno())
        key = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        out = cache_dir("xz", key) / (path.name.removesuffix(".xz") or "unpacked")
        if out.is_file():
            return out
        try:
            with atomic_path(out) as tmp, open(tmp, "wb") as dst:  # a refused or interrupted unpack leaves nothing
                _unxz(src, dst, path, st.st_size)
        except BaseException:
            with contextlib.suppress(OSError):
                out.parent.rmdir()  # the key's directory too, when nothing else is in it
            raise
    return out


def _unxz(src, dst, path: Path, packed: int) -> None:
    """Unpack the xz stream(s) of ``src`` into ``dst`` in bounded steps, refusing output past the caps."""
    import lzma

    ratio = env_limit("BSPROF_MAX_XZ_RATIO", DEFAULT_MAX_XZ_RATIO)
    cap_total = max_input_bytes()
    cap_ratio = max(ratio * packed, _XZ_FLOOR_BYTES)
    cap = min(cap_total, cap_ratio)
    dec = lzma.LZMADecompressor()
    total = 0
    pending = b""
    try:
        while True:
            if dec.eof:  # another stream follows (xz files concatenate), or trailing padding
                pending = dec.unused_data + pending
                if not pending:
                    pending = src.read(1 << 20)
                if not pending.strip(b"\0"):
                    break
                dec = lzma.LZMADecompressor()
            if dec.needs_input and not pending:
                pending = src.read(1 << 20)
                if not pending:
                    raise BsprofError(
                        f"{path}: an xz file that does not decompress (it ends early: a truncated "
                        "download?); re-download or re-compress it"
                    )
            chunk = dec.decompress(pending, max_length=1 << 22)
            pending = b""
            total += len(chunk)
            if total > cap:
                if cap == cap_total:
                    raise too_large(path, f"unpacks to more than {human_bytes(cap)}, which", cap)
                raise BsprofError(
                    f"{path}: unpacks to more than {ratio}x its size ({human_bytes(packed)} -> over "
                    f"{human_bytes(cap)}): a compression bomb, or a file that is no bsprof input; if it "
                    f"is real, raise the limit (export BSPROF_MAX_XZ_RATIO={ratio * 10})"
                )
            dst.write(chunk)
    except lzma.LZMAError as exc:
        raise BsprofError(
            f"{path}: an xz file that does not decompress ({exc}); re-download or re-compress it"
        ) from None
