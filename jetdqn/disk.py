"""Why a file could not be written (or read), in the words that say what to do about it.

Every failed write used to end in "(<strerror>); is the disk full or read-only?". That is the right guess
for ENOSPC and EROFS, and a wrong lead for the others a board owner meets: a container running as a user
who may not write the mounted run directory (EACCES), a checkpoint with its replay past a file-size limit
(EFBIG: ``ulimit -f``, or a USB stick formatted vfat, which holds at most 4 GiB per file), a card that
fails the write (EIO), a folder removed under a run or one that takes no files at all (ENOENT: /proc).
No torch import here: ``telemetry plot`` runs on JetPack 5's Python 3.8.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional

PLAIN = {errno.ENOSPC, errno.EROFS, errno.EDQUOT}   # the strerror says it all


def why_not_written(exc: BaseException) -> str:
    """The cause of a failed write, for a sentence's parentheses: the OS's words, then what they mean here
    where those words alone mislead."""
    if not isinstance(exc, OSError) or not exc.strerror:
        return f"{exc or type(exc).__name__}; is the disk full or read-only?"
    said = exc.strerror
    if exc.errno in PLAIN:
        return said
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{said}: user {user()} may not write there"
    if exc.errno == errno.EFBIG:
        return f"{said}: past ulimit -f or the filesystem's largest file, 4 GiB on vfat"
    if exc.errno == errno.EIO:
        return f"{said}: the disk failed the write (dmesg may say why)"
    if exc.errno == errno.ENAMETOOLONG:   # past NAME_MAX (255 bytes) or PATH_MAX: the name, not the disk
        return f"{said}: a file or folder name holds at most 255 bytes"
    if exc.errno == errno.EMFILE:   # the process's descriptors, not the disk
        return f"{said}: this process has as many files open as ulimit -n lets it ({open_files_limit()})"
    if exc.errno == errno.ENFILE:
        return f"{said}: the system's table of open files is full (fs.file-max)"
    if exc.errno == errno.ENOENT and isinstance(exc.filename, str):   # a folder that went away, or one that
        folder = os.path.dirname(os.path.abspath(exc.filename))         # takes no new files (/proc, /sys)
        return f"{said}: {folder} takes no new files" if os.path.isdir(folder) else f"{said}: {folder} is gone"
    blocking = in_the_way(exc)
    if blocking:
        path, kind = blocking
        return f"{said}: {path} is a {kind} where jetdqn writes a {'file' if kind == 'folder' else 'folder'}"
    return f"{said}; is the disk full or read-only?"


def in_the_way(exc: BaseException):
    """(path, "folder" or "file") of what stands where a write needs the other kind: a folder named log.jsonl
    (EISDIR; for a rename, the folder named as its target), or a file named checkpoints (ENOTDIR: the first
    file on the way down the path; EEXIST: the folder a mkdir would make); None for any other error. Each was
    "is the disk full or read-only?", and the fix was "free some space"."""
    if not isinstance(exc, OSError) or exc.errno not in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST):
        return None
    names = [name for name in (exc.filename2, exc.filename) if isinstance(name, str)]
    for name in names:
        if exc.errno == errno.EISDIR and os.path.isdir(name):
            return name, "folder"
        if exc.errno == errno.EEXIST and os.path.exists(name) and not os.path.isdir(name):   # a mkdir's
            return name, "file"
        blocking = first_file_on(Path(name)) if exc.errno == errno.ENOTDIR else None
        if blocking:
            return str(blocking), "file"
    return None


def first_file_on(path: Path) -> Optional[Path]:
    """The first file (not a folder) on the way down ``path``, from the top, or None."""
    for part in (*reversed(path.parents), path):
        if part.exists() and not part.is_dir():
            return part
    return None


def first_broken_link(path) -> Optional[Path]:
    """The first of ``path`` and the folders above it that is a symbolic link leading to nothing (a drive not
    mounted, links that loop), or None."""
    return next((p for p in (Path(path), *Path(path).parents) if p.is_symlink() and not p.exists()), None)


def missing_folder(path) -> Optional[str]:
    """Why a file cannot be made at ``path`` for want of its folder (one clause), or None where the folder is
    there: "its folder X does not exist", or, where a file stands on the way, "X is a file, not a folder"
    (it was said not to exist, beside the file of that name)."""
    folder = Path(os.path.realpath(path)).parent   # realpath: a link loop is no error (resolve raised on it)
    if folder.is_dir():
        return None
    blocking = first_file_on(folder)
    if blocking:
        return f"{blocking} is a file, not a folder"
    broken = first_broken_link(folder)
    if broken is not None:   # a drive not mounted, or links that lead to each other
        return f"{broken} is a link to {os.readlink(broken)}, which leads to nothing (a drive not mounted? a loop?)"
    return f"its folder {folder} does not exist"


class NotWritten(OSError):
    """A write's OSError whose ``str`` is already its sentence (``plot.FigureNotWritten``): printed as it is,
    where any other OSError a command meets is a read (``not_read``)."""


def why_not_read(exc: BaseException) -> str:
    """The cause of a failed read, for a sentence's parentheses. A file another user keeps to itself (mode
    600: a run written by a container's root) was "corrupt, truncated or not a safe checkpoint ... delete it",
    "may not write there" for a --config only read, or a bare "[Errno 13] Permission denied: ..."."""
    if not isinstance(exc, OSError) or not exc.strerror:
        return str(exc) or type(exc).__name__
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{exc.strerror}: user {user()} may not read it"
    if exc.errno == errno.EIO:
        return f"{exc.strerror}: the disk failed the read (dmesg may say why)"
    blocking = in_the_way(exc) if exc.errno == errno.ENOTDIR else None
    if blocking:   # afile/x: which part is the file
        return f"{exc.strerror}: {blocking[0]} is a file, not a folder"
    return exc.strerror


def not_read(exc: OSError) -> str:
    """One sentence for a file a command could not read (plot's log.jsonl, say)."""
    return f"{exc.filename or 'a file'} cannot be read ({why_not_read(exc)})."


def sentence(exc: BaseException) -> str:
    """What a command that reads files and writes one says of an error it met: a write's ``NotWritten`` as
    it says itself, another OSError as a read (``not_read``), anything else (a ValueError's sentence) as is."""
    return not_read(exc) if isinstance(exc, OSError) and not isinstance(exc, NotWritten) else str(exc)


def unreadable(exc: BaseException) -> bool:
    """Whether an OSError is about a file that is there and that this user may not read (not a write)."""
    name = getattr(exc, "filename", None)
    return (isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM) and name is not None
            and os.path.isfile(name) and not os.access(name, os.R_OK))


def what_to_do(exc: BaseException, where: str = "the run directory") -> str:
    """What mends the cause ``why_not_written`` gave, for a sentence that goes on "..., then --resume"."""
    number = exc.errno if isinstance(exc, OSError) else None
    if number in (errno.ENOSPC, errno.EDQUOT):
        return "free some space"
    if number == errno.EROFS:
        return f"make {where} writable"
    if number in (errno.EACCES, errno.EPERM):
        return f"let user {user()} write {where} (or run as its owner)"
    if number == errno.ENAMETOOLONG:
        return f"give {where} a shorter name"
    if number == errno.EMFILE:
        return "raise ulimit -n (1024 is the usual default)"
    if number == errno.ENFILE:
        return "close other programs' files, or raise fs.file-max"
    if number == errno.ENOENT:
        return f"put {where} in a folder that is there and takes files"
    blocking = in_the_way(exc)
    if blocking:
        return f"move the {blocking[1]} {blocking[0]} out of the way"
    if number == errno.EFBIG:
        return f"raise ulimit -f, or move {where} to a filesystem that holds larger files (ext4)"
    return f"free some space (or make {where} writable)"


def open_files_limit() -> str:
    """The soft limit on this process's open files (``ulimit -n``), as a number or "unlimited"."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def user() -> str:
    """This process's user, by name where it has one (a container's user often has none: its number)."""
    uid = os.geteuid()
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)
