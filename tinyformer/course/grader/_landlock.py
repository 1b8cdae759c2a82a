"""Linux Landlock for the grader's child: what the student's code may read, write and signal.

A process boundary alone is not a room: a child of the grader's own user could read another
grade's tree, leave files in /tmp for a later grade to run, or signal the grader. Landlock
(Linux 5.13+, unprivileged) lets the child, just before it runs the student's code, give up
the right to:

- write, create, remove or rename anything outside its own private folder;
- read anything outside the tree it grades, its third-party packages, its private folder,
  Python's own installation and the system folders (/usr, /lib, /etc, /proc, /sys, /dev): no
  other grade's room, no instructor tree, no home folder;
- open or accept TCP connections (ABI 4+);
- signal any process outside its own (ABI 6+: the grader, other grades).

`restrict` is called in the child between fork and exec (`preexec_fn`); where the kernel has no
Landlock it does nothing and returns 0, and the grader's other walls (its own user, `--user`)
stand alone.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from collections.abc import Iterable

__all__ = ["SYSTEM_FOLDERS", "abi", "restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << i for i in range(4, 13))  # remove dir/file, make char..sym
REFER, TRUNCATE = 1 << 13, 1 << 14
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a file may hold
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

SYSTEM_FOLDERS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def abi() -> int:
    """The kernel's Landlock ABI version, or 0 where there is none (or it is disabled)."""
    libc = _libc()
    if libc is None:
        return 0
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def _handled(version: int) -> int:
    rights = READ | WRITE_FILE | _MAKE_AND_REMOVE
    rights |= REFER if version >= 2 else 0
    rights |= TRUNCATE if version >= 3 else 0
    return rights


def _add(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a folder this machine does not have
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("<Qi", rights & handled, fd), 12)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, attr, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def restrict(read: Iterable[str], write: Iterable[str]) -> int:
    """Restrict this process and its future children: read (and run) only below `read` and
    `write`, write only below `write`, no TCP, no signals outside. Returns the ABI used, 0 if
    the kernel has no Landlock.

    Raises:
        OSError: the kernel has Landlock but refused the rules.
    """
    version = abi()
    libc = _libc()
    if not version or libc is None:
        return 0
    handled = _handled(version)
    fields = [handled]
    if version >= 4:
        fields.append(NET_BIND_TCP | NET_CONNECT_TCP)
    if version >= 6:
        fields.append(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    attr = ctypes.create_string_buffer(struct.pack(f"<{len(fields)}Q", *fields), 8 * len(fields))
    ruleset = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(8 * len(fields)), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in read:
            _add(libc, ruleset, path, READ, handled)
        for path in write:
            _add(libc, ruleset, path, handled, handled)
        for device in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"):
            _add(libc, ruleset, device, READ_FILE | WRITE_FILE, handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version
