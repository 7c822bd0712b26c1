"""The worker's seccomp filter, installed (through libseccomp, via ctypes) after the task's
reference has run and before the candidate is imported.

The process sandbox (bubblewrap: no network namespace to speak of, a read-only view) already
holds the candidate; the filter takes away what a kernel never needs and an escape always does:
new programs (execve), new processes (fork; threads stay allowed), sockets (a local one is refused
rather than killed: glibc asks nscd through one), tracing other processes, and kernel objects that
outlive the process (System V IPC, message queues, keyrings). A forbidden call kills the worker with SIGSYS, which the runner reports as a sandbox
violation naming the signal. The filter is inherited by every thread and cannot be lifted.
"""
from __future__ import annotations

import ctypes

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
ENOSYS = 38
SCMP_CMP_NE = 1
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
EACCES = 13
AF_UNIX = 1
CLONE_THREAD = 0x00010000
KILLED_CALLS = ("execve", "execveat", "fork", "vfork", "socketpair", "ptrace",
                "process_vm_writev", "process_vm_readv", "kexec_load", "mount", "unshare", "setns",
                "bpf", "perf_event_open", "userfaultfd",
                # Kernel objects that outlive the process (System V IPC and POSIX message queues
                # live as long as the IPC namespace, keys as long as their keyring): a place one
                # evaluation could leave something for a later one.
                "shmget", "semget", "msgget", "mq_open", "add_key", "request_key", "keyctl")


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class ConfineError(Exception):
    pass


def install() -> None:
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)  # Debian's libseccomp2
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise ConfineError("seccomp_init failed")

    def rule(action: int, name: str, *cmps: _ArgCmp) -> None:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # not on this architecture
        array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
        rc = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
        if rc != 0:
            raise ConfineError(f"seccomp rule for {name}: {rc}")

    try:
        for name in KILLED_CALLS:
            rule(SCMP_ACT_KILL_PROCESS, name)
        # clone: threads yes (CLONE_THREAD set), processes no. clone3 passes its flags in memory a
        # filter cannot read, so it answers ENOSYS and glibc falls back to clone.
        rule(SCMP_ACT_KILL_PROCESS, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))
        rule(0x00050000 | ENOSYS, "clone3")
        # socket: killed, except a local (AF_UNIX) one, which is refused (EACCES). glibc opens one
        # to ask nscd for a user name (getpwuid), and libtpu's LLO dump, which the estimated
        # device time reads, looks one up when it writes its files: refused, glibc reads
        # /etc/passwd instead. A refused socket gives the process nothing.
        rule(SCMP_ACT_KILL_PROCESS, "socket", _ArgCmp(0, SCMP_CMP_NE, AF_UNIX, 0))
        rule(0x00050000 | EACCES, "socket", _ArgCmp(0, SCMP_CMP_EQ, AF_UNIX, 0))
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            raise ConfineError(f"seccomp_load: {rc}")
    finally:
        lib.seccomp_release(ctx)
