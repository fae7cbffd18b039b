"""Confine a process that is about to run a student's code, with the operating system's mechanisms.

`confine(workdir, readable, limits)` is called in a freshly forked child before any submitted code
runs. Everything it sets holds for the rest of the process's life and for any thread it starts: no
call the submitted code can make undoes it.

- Resource limits (`setrlimit`; Linux and macOS): address space, CPU seconds, the size of any file
  written (the output log), open files, no core dumps.
- Root drops to an unprivileged user (uid and gid 65534, "nobody") with no extra groups; where
  that user could not read Python itself (installed under /root, mode 700), it stays uid 0 but
  drops every capability (so it can neither override file permissions nor administer anything).
- No new privileges (`PR_SET_NO_NEW_PRIVS`; Linux): needed by the two below, and set-uid programs
  no longer raise privileges.
- Landlock (Linux 5.13+, when the kernel has it enabled): the process may read only the paths in
  `readable` (Python, its packages, the course's helpers) and write nowhere; from Landlock ABI 4
  on (Linux 6.7) it may not bind or connect a TCP socket; from ABI 6 (Linux 6.12) it may not signal
  a process outside itself.
- seccomp (Linux, x86-64 and arm64): no socket at all, no new process (fork, vfork, clone without
  CLONE_THREAD), no exec, no ptrace, no signal, resource limit or scheduling change for any other
  process, no change to a file's mode, owner, times or extended attributes (Landlock does not
  cover those), no namespaces, mounts, bpf, io_uring, keyrings or reading another process's
  memory. Threads are allowed (PyTorch's own).

`PROTECTIONS` says which of these this machine enforces; the report prints it. On macOS only the
resource limits hold (macOS does not enforce the address-space limit); on Windows (no fork) the
grader runs each notebook in a fresh process with a wall-clock limit, a scrubbed environment and an
empty working folder, and nothing else.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass

NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    """What one notebook may use. memory: bytes of address space beyond what the grader itself
    already maps; cpu: CPU seconds for the whole notebook; output: bytes it may print."""

    memory: int = 1 << 30
    cpu: int = 60
    output: int = 1 << 20
    files: int = 256


# --- Landlock ------------------------------------------------------------------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
# every filesystem right of ABI 1, and what ABIs 2, 3 and 5 add (refer, truncate, ioctl on devices)
_FS_ABI1 = (1 << 13) - 1
_FS_BY_ABI = {1: _FS_ABI1, 2: _FS_ABI1 | 1 << 13, 3: _FS_ABI1 | 3 << 13, 5: _FS_ABI1 | 7 << 13}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_PR_SET_NO_NEW_PRIVS = 38


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled, or not Linux)."""
    libc = _libc()
    if sys.platform != "linux" or libc is None:
        return 0
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(version, 0)


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(a for a in _FS_BY_ABI if a <= abi)]


def _landlock(readable: Iterable[str], abi: int) -> None:
    libc = _libc()
    handled = _fs_rights(abi)
    attr = struct.pack(
        "QQQ",
        handled,
        (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, attr[:size], ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    for path in dict.fromkeys(readable):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this machine lacks
        rights = read if os.path.isdir(path) else _FS_EXECUTE | _FS_READ_FILE
        rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr, packed
        done = libc.syscall(_SYS_ADD_RULE, ruleset, 1, rule, 0)
        os.close(fd)
        if done < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


# --- seccomp -------------------------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# syscall numbers: x86-64's own table; arm64's is the generic one (no fork or vfork there)
_DENIED = {
    "x86_64": {
        "socket": 41, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
        "tkill": 200, "unshare": 272, "setns": 308, "mount": 165, "bpf": 321,
        "process_vm_readv": 310, "process_vm_writev": 311, "io_uring_setup": 425,
        "userfaultfd": 323, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "pidfd_open": 434, "pidfd_send_signal": 424, "reboot": 169,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "chroot": 161, "pivot_root": 155, "umount2": 166, "swapon": 167, "swapoff": 168,
        "settimeofday": 164, "clock_settime": 227, "sethostname": 170, "setdomainname": 171,
        "acct": 163, "iopl": 172, "ioperm": 173, "open_by_handle_at": 304, "chmod": 90,
        "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93, "lchown": 94,
        "fchownat": 260, "utime": 132, "utimes": 235, "utimensat": 280, "futimesat": 261,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466,
        "pidfd_getfd": 438, "kcmp": 312, "setpriority": 141, "ioprio_set": 251,
        "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    },
    "aarch64": {
        "socket": 198, "execve": 221, "execveat": 281, "ptrace": 117, "tkill": 130,
        "unshare": 97, "setns": 268, "mount": 40, "bpf": 280, "process_vm_readv": 270,
        "process_vm_writev": 271, "io_uring_setup": 425, "userfaultfd": 282,
        "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218,
        "pidfd_open": 434, "pidfd_send_signal": 424, "reboot": 142, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "kexec_load": 104, "chroot": 51,
        "pivot_root": 41, "umount2": 39, "swapon": 224, "swapoff": 225, "settimeofday": 170,
        "clock_settime": 112, "sethostname": 161, "setdomainname": 162, "acct": 89,
        "open_by_handle_at": 265, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchown": 55,
        "fchownat": 54, "utimensat": 88, "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
        "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "setxattrat": 463,
        "removexattrat": 466, "pidfd_getfd": 438, "kcmp": 272, "setpriority": 140,
        "ioprio_set": 30, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    },
}  # fmt: skip
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
# calls whose first argument is a pid: allowed on this process only (its pid, or 0 = itself):
# kill, tgkill, prlimit64, sched_setaffinity, sched_setscheduler, sched_setparam, sched_setattr
_OWN_PID = {
    "x86_64": (62, 234, 302, 203, 144, 142, 314),
    "aarch64": (129, 131, 261, 122, 119, 118, 274),
}
_X32 = 0x40000000  # x86-64's x32 numbers: none allowed
_CLONE_THREAD = 0x00010000
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _seccomp_program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The filter, as BPF instructions (code, jump if true, jump if false, k)."""
    deny = _RET_ERRNO | errno.EPERM
    prog = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, _AUDIT_ARCH[machine]), (_RET_K, 0, 0, deny)]
    prog.append((_LD_W_ABS, 0, 0, 0))  # the syscall's number
    if machine == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32), (_RET_K, 0, 0, deny)]
    for number in _DENIED[machine].values():
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, deny)]
    prog += [(_JEQ_K, 0, 1, _CLONE3), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]  # glibc: clone
    # clone: a thread (CLONE_THREAD in its flags, the first argument) yes, a process no
    prog += [
        (_JEQ_K, 0, 4, _CLONE[machine]), (_LD_W_ABS, 0, 0, 16), (_JSET_K, 1, 0, _CLONE_THREAD),
        (_RET_K, 0, 0, deny), (_RET_K, 0, 0, _RET_ALLOW),
    ]  # fmt: skip
    # kill, prlimit64, …: only this process (its own pid, or 0)
    for number in _OWN_PID[machine]:
        prog += [(_JEQ_K, 0, 5, number), (_LD_W_ABS, 0, 0, 16), (_JEQ_K, 2, 0, pid),
                 (_JEQ_K, 1, 0, 0), (_RET_K, 0, 0, deny), (_RET_K, 0, 0, _RET_ALLOW)]  # fmt: skip
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def _seccomp(machine: str) -> None:
    prog = _seccomp_program(machine, os.getpid())
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buffer = ctypes.create_string_buffer(raw)

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog), ctypes.addressof(buffer))
    libc = _libc()
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


# --- all together --------------------------------------------------------------------------------


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def protections() -> dict[str, bool]:
    """Which of the confinements this machine enforces (the report prints them)."""
    linux = sys.platform == "linux"
    abi = landlock_abi()
    fork = hasattr(os, "fork")
    return {
        "a separate process per notebook": True,
        "a wall-clock time limit per notebook and per exercise": True,
        "a scrubbed environment and an empty working folder": True,
        "a memory limit (address space; setrlimit)": linux and fork,
        "CPU-time and output limits (setrlimit)": fork,
        "runs as the user nobody, or as root without any capability, when the grader runs as "
        "root": fork,
        "reads only Python, its packages and the course's helpers; writes nowhere (Landlock)": (
            linux and abi >= 1
        ),
        "no network (seccomp: no socket; Landlock: no TCP)": linux and _machine() in _DENIED,
        "no new processes, no exec, no signals to other processes (seccomp)": (
            linux and _machine() in _DENIED
        ),
    }


def _setrlimit(which: int, value: int) -> None:
    import resource

    _, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):  # macOS refuses some (RLIMIT_AS): the report says so
        pass


def mapped_bytes() -> int:
    """This process's address space now (Linux: VmSize), 0 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def others_can_read(path: str) -> bool:
    """Whether a user with no relation to the file's owner can read `path` (every folder on the
    way searchable by others, the file or folder itself readable by them)."""
    import stat

    current = os.path.abspath(path)
    try:
        mode = os.stat(current).st_mode
        if not mode & stat.S_IROTH:
            return False
        while True:
            parent = os.path.dirname(current)
            if parent == current:
                return True
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            current = parent
    except OSError:
        return False


_CAPSET = {"x86_64": 126, "aarch64": 91}


def drop_root(readable: Iterable[str]) -> str:
    """As root: become the user nobody if Python can still be read then, else stay uid 0 with no
    capability at all (a Python installed under /root, mode 700). Returns which."""
    if sys.platform == "linux" and not _python_readable_by_others(readable):
        header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = bytes(24)  # effective, permitted, inheritable: none, in both 32-bit halves
        if _libc().syscall(_CAPSET[_machine()], header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        return "uid 0 without capabilities"
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return "nobody"


def _python_readable_by_others(readable: Iterable[str]) -> bool:
    return all(others_can_read(p) for p in readable if os.path.exists(p) and "python" in p.lower())


def refusal(readable: Iterable[str]) -> str | None:
    """Why this machine must not grade untrusted code, or None. As root, where the user nobody
    cannot read Python, the children stay uid 0 without capabilities: safe only with Landlock
    (no file reads or writes) and seccomp (no change to a file's mode, owner or times)."""
    if os.name != "posix" or os.geteuid() != 0 or sys.platform != "linux":
        return None
    if _python_readable_by_others(readable):
        return None
    if landlock_abi() >= 1 and _machine() in _DENIED:
        return None
    return (
        "this runs as root, with a Python the user nobody cannot read, on a kernel without "
        "Landlock or seccomp filters: the graded code would run as root. Run the report as an "
        "ordinary user."
    )


def confine(readable: Iterable[str], limits: Limits) -> None:
    """Apply every confinement this machine has to the calling process (see the module's
    docstring). Call it in a forked child, single-threaded, after the files it needs are open."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the output limit fails (EFBIG)
    mapped = mapped_bytes()
    if mapped:
        _setrlimit(resource.RLIMIT_AS, mapped + limits.memory)
    _setrlimit(resource.RLIMIT_CPU, limits.cpu)
    _setrlimit(resource.RLIMIT_FSIZE, limits.output)
    _setrlimit(resource.RLIMIT_NOFILE, limits.files)
    _setrlimit(resource.RLIMIT_CORE, 0)
    if os.geteuid() == 0:
        drop_root(readable)
    if sys.platform != "linux":
        return
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    abi = landlock_abi()
    if abi >= 1:
        _landlock(readable, abi)
    if _machine() in _DENIED:
        _seccomp(_machine())
