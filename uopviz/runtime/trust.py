"""The compiled-kernel cache, trusted as the user's home is: a library in it is code this process will run, so a
folder or file there that another user owns, or that group or others may write, is refused (as ssh refuses such a
~/.ssh and Jupyter such a runtime folder), and the folders uopviz creates are created 0700.

Files are checked through the descriptor they are read from (`fstat`, not a second look up of the path), and a
library is loaded through its checked folder's descriptor, so what was checked is what runs even if the path
is swapped in between. A digest beside a library cannot do this: whoever can replace the one can rewrite the other.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import pwd
import stat
import weakref
from pathlib import Path

from uopviz.runtime.device import DeviceError


class CacheTrustError(DeviceError):
    """A cache folder or file that someone other than this user could have written; the message says how to fix it."""


def private_dirs(path: Path) -> list[Path]:
    """Create path's missing folders (path included), each 0700 (Path.mkdir gives parents the umask's mode);
    the folders it tried to make, outermost first (another process, or another user, may have been first).
    NotADirectoryError where path, or its nearest existing parent, is not a folder."""
    made = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        made.append(p)
        p = p.parent
    if not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(p))
    for p in reversed(made):
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=0o700)
    return made[::-1]


def trusted_dir(path: Path) -> Path:
    """path, created 0700 with any missing parents (private_dirs); CacheTrustError where path or one of the
    folders made for it is not trusted (as another user may have made it first), OSError where it cannot be made."""
    for p in dict.fromkeys([*private_dirs(path), path]):
        os.close(open_checked(p, directory=True))
    return path


def open_checked(path: Path, dir_fd: int | None = None, directory: bool = False) -> int:
    """A read-only descriptor of path (of its name in the folder dir_fd, when given), after checking what it opened:
    a folder (directory; a link to one is followed, as the folder itself is checked) or a regular file (not a link),
    owned by this user and not writable by group or others. CacheTrustError otherwise; OSError (FileNotFoundError,
    ...) where it cannot be opened. O_NONBLOCK: a FIFO planted under a library's name is refused, not waited on."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (os.O_DIRECTORY if directory else os.O_NOFOLLOW)
    try:
        fd = os.open(path.name if dir_fd is not None else path, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP and not directory:
            raise CacheTrustError(f"{path} is a symbolic link, not a file uopviz wrote: remove it "
                                  f"(rm {path}) and the kernel is compiled again") from None
        if isinstance(e, PermissionError):  # another user's 0700 folder: say so, not just "cannot be read"
            _check(os.stat(path if dir_fd is None else path.name, dir_fd=dir_fd), path, directory)
        raise
    try:
        _check(os.fstat(fd), path, directory)
    except BaseException:
        os.close(fd)
        raise
    return fd


def load_library(path: Path) -> ctypes.CDLL:
    """The shared library at path, loaded after its folder and the file are checked (open_checked): through
    /proc/self/fd, the folder loaded from is the folder checked. It is unloaded (dlclose) when the returned object
    is dropped, so whoever calls into it must hold it: ctypes never unloads, and a process that loads libraries
    without end runs out of memory mappings (vm.max_map_count)."""
    folder = open_checked(path.parent, directory=True)
    try:
        os.close(open_checked(path, dir_fd=folder))
        via = Path(f"/proc/self/fd/{folder}")
        lib = ctypes.CDLL(str(via / path.name) if via.is_dir() else str(path))
    finally:
        os.close(folder)
    unload = weakref.finalize(lib, _dlclose, lib._handle)
    unload.atexit = False  # at exit the process goes anyway; a pool thread may still be inside one
    return lib


def _dlclose(handle: int) -> None:
    import _ctypes
    _ctypes.dlclose(handle)


def _check(st: os.stat_result, path: Path, directory: bool) -> None:
    what = "folder" if directory else "file"
    if not (stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)):
        raise CacheTrustError(f"{path} is not a regular {what}: the kernel cache holds only folders and files uopviz "
                              f"wrote; remove it (rm -r {path})")
    me = os.geteuid()
    if st.st_uid != me:
        raise CacheTrustError(
            f"the kernel cache {what} {path} is owned by {_user(st.st_uid)}, not by you ({_user(me)}): another user "
            f"could put code there that uopviz would run. Use a cache of your own (unset UOPVIZ_CACHE_DIR for "
            f"~/.cache/uopviz, or set it to a new folder), or, if the {what} is yours, take it (chown -R "
            f"{_name(me)} {path})")
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if st.st_mode & bit)
        raise CacheTrustError(
            f"the kernel cache {what} {path} may be written by {who} (mode {stat.S_IMODE(st.st_mode):04o}): another "
            f"user could put code there that uopviz would run. Fix with: chmod {'-R ' if directory else ''}go-w "
            f"{path} (a cache folder uopviz creates is 0700)")


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _user(uid: int) -> str:
    name = _name(uid)
    return f"{name} (uid {uid})" if name != str(uid) else f"uid {uid}"
