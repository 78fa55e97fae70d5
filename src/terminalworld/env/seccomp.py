"""The sandbox's seccomp filter: a classic-BPF program of its own, loaded by bwrap (`--seccomp FD`)
into the sandbox's pid 1 and every command.

It denies (EPERM) what lets one process inside reach into another or out of the sandbox's own
state: ptrace and the process-memory calls (process_vm_readv/writev, process_madvise, pidfd_getfd,
kcmp), the kernel keyring (add_key, request_key, keyctl: keys outlive a sandbox and the user keyring
is shared by its host uid), perf_event_open, bpf, userfaultfd, io_uring (a large kernel surface a
shell never needs), module and kexec loading, open_by_handle_at, acct, swap, reboot, syslog,
quotactl, iopl/ioperm and lookup_dcookie; a new user namespace (clone or unshare with
CLONE_NEWUSER; clone3, whose flags a filter cannot read, fails with ENOSYS so libc falls back to
clone), as bwrap's --disable-userns cannot be combined with the start-up handshake; and personality() except the values programs query or set
harmlessly (Docker's list). A call from another architecture's ABI (i386 `int 0x80` on x86_64, x32)
kills the process, so no second syscall table bypasses the list. Hosts other than x86_64 and
aarch64 get no filter (`program()` is None) and the sandbox says so in its threat model.
"""

from __future__ import annotations

import functools
import platform
import struct

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED = {  # name: (x86_64, aarch64); None where the architecture has no such call
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "perf_event_open": (298, 241),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "open_by_handle_at": (304, 265),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "lookup_dcookie": (212, 18),
    "iopl": (172, None),
    "ioperm": (173, None),
}
_PERSONALITY = (135, 92)
_NEW_USERNS = ((56, 220), (272, 97))  # clone and unshare: denied with CLONE_NEWUSER in their flags
_CLONE3 = 435  # its flags sit in memory a filter cannot read: ENOSYS, and libc falls back to clone
_CLONE_NEWUSER = 0x10000000
_SAFE_PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # PER_LINUX, PER_LINUX32, UNAME26 variants, query
_X32_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_EPERM, _RET_ENOSYS = 0x7FFF0000, 0x80000000, 0x00050000 | 1, 0x00050000 | 38
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args are little-endian u64s)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.cache
def program(machine: str | None = None) -> bytes | None:
    """The filter for `machine` (default this host's) as bwrap reads it: an array of struct
    sock_filter; None for an architecture this module has no syscall table for."""
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    col = 0 if machine == "x86_64" else 1
    out = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, _AUDIT_ARCH[machine], jt=1), _insn(_RET_K, _RET_KILL_PROCESS)]
    out.append(_insn(_LD_W_ABS, _NR))
    if machine == "x86_64":
        out += [_insn(_JGE_K, _X32_BIT, jf=1), _insn(_RET_K, _RET_KILL_PROCESS)]
    for nr in sorted({nrs[col] for nrs in _DENIED.values() if nrs[col] is not None}):
        out += [_insn(_JEQ_K, nr, jf=1), _insn(_RET_K, _RET_EPERM)]
    out += [_insn(_JEQ_K, _CLONE3, jf=1), _insn(_RET_K, _RET_ENOSYS)]
    for nrs in _NEW_USERNS:  # each block leaves the syscall number loaded for the next test
        out += [_insn(_JEQ_K, nrs[col], jf=4), _insn(_LD_W_ABS, _ARG0), _insn(_JSET_K, _CLONE_NEWUSER, jf=1)]
        out += [_insn(_RET_K, _RET_EPERM), _insn(_RET_K, _RET_ALLOW)]
    # personality(2): allowed only with one of the safe values, whatever the upper half of the argument.
    out += [_insn(_JEQ_K, _PERSONALITY[col], jf=len(_SAFE_PERSONAS) + 2), _insn(_LD_W_ABS, _ARG0)]
    out += [_insn(_JEQ_K, v, jt=len(_SAFE_PERSONAS) - i) for i, v in enumerate(_SAFE_PERSONAS)]
    out += [_insn(_RET_K, _RET_EPERM), _insn(_RET_K, _RET_ALLOW)]
    return b"".join(out)
