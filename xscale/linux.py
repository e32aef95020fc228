"""Linux EABI system calls for the XScale core (ARM, r7 = number, r0-r5 = arguments).

What a static glibc program and a daemon use: memory (brk, mmap2, munmap,
mremap, mprotect, madvise), the ARM set_tls (0xf0005), thread and signal set-up that a
single-threaded process can satisfy, files (host files by path; stdout and
stderr collected by the core), emulated time (clock_gettime/64, gettimeofday,
nanosleep, clock_nanosleep: sleeping costs emulated time only), deterministic
getrandom, poll/ppoll, and Unix-domain stream sockets bridged to host Unix
sockets (the control socket of a daemon).  /dev/ixp2800 (and /dev/mem) is the
chip (npkit.xscale.device).  Any other call returns -ENOSYS, logged once by
number and name.
"""

from __future__ import annotations

import errno as E
import os
import select
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

from unicorn import UcError
from unicorn import arm_const as A
from unicorn import unicorn_const as U

from .guest import MMAP_BASE, MMAP_END, PAGE, TLS_SLOT, Guest, Wait, page_up

EPOCH_S = 1_700_000_000          # CLOCK_REALTIME = this + emulated time (deterministic)
POLLIN, POLLOUT, POLLERR, POLLHUP, POLLNVAL = 1, 4, 8, 16, 32
O_NONBLOCK = 0o4000

NAMES = {
    1: "exit", 3: "read", 4: "write", 5: "open", 6: "close", 10: "unlink", 19: "lseek", 20: "getpid",
    33: "access", 37: "kill", 60: "umask", 93: "ftruncate", 194: "ftruncate64", 41: "dup", 45: "brk", 54: "ioctl", 64: "getppid", 78: "gettimeofday",
    85: "readlink", 91: "munmap", 116: "sysinfo", 120: "clone", 122: "uname", 125: "mprotect",
    140: "_llseek", 146: "writev", 158: "sched_yield", 162: "nanosleep", 163: "mremap", 168: "poll",
    173: "rt_sigreturn", 174: "rt_sigaction", 175: "rt_sigprocmask", 183: "getcwd", 186: "sigaltstack",
    190: "vfork", 191: "ugetrlimit", 192: "mmap2", 195: "stat64", 196: "lstat64", 197: "fstat64",
    199: "getuid32", 200: "getgid32", 201: "geteuid32", 202: "getegid32", 217: "getdents64",
    220: "madvise", 221: "fcntl64", 224: "gettid", 238: "tkill", 240: "futex", 242: "sched_getaffinity",
    248: "exit_group", 256: "set_tid_address", 263: "clock_gettime", 264: "clock_getres",
    265: "clock_nanosleep", 268: "tgkill", 281: "socket", 282: "bind", 283: "connect", 284: "listen",
    285: "accept", 286: "getsockname", 287: "getpeername", 288: "socketpair", 289: "send",
    290: "sendto", 291: "recv", 292: "recvfrom", 293: "shutdown", 294: "setsockopt",
    295: "getsockopt", 296: "sendmsg", 297: "recvmsg", 322: "openat", 327: "fstatat64",
    328: "unlinkat", 332: "readlinkat", 334: "faccessat", 335: "pselect6", 336: "ppoll",
    38: "rename", 329: "renameat", 382: "renameat2", 338: "set_robust_list", 358: "dup3", 359: "pipe2", 366: "accept4", 369: "prlimit64",
    384: "getrandom", 397: "statx", 398: "rseq", 403: "clock_gettime64", 406: "clock_getres_time64",
    407: "clock_nanosleep_time64", 414: "ppoll_time64", 0xF0002: "cacheflush", 0xF0005: "set_tls",
}  # fmt: skip

# open flags: ARM values that differ from the host's (x86-64)
_ARM_O = {0o40000: os.O_DIRECTORY, 0o100000: os.O_NOFOLLOW, 0o400000: 0}   # O_LARGEFILE: none on the host


def _host_flags(flags: int) -> int:
    out = flags & (0o3 | 0o100 | 0o200 | 0o400 | 0o1000 | 0o2000 | 0o4000 | 0o2000000)
    for arm, host in _ARM_O.items():
        if flags & arm:
            out |= host
    return out


class File:
    """An open file description of the emulated process."""

    nonblock = False

    def read(self, n: int) -> bytes | int | None:  # bytes, -errno, or None = would block
        return -E.EBADF

    def write(self, data: bytes) -> int:
        return -E.EBADF

    def poll(self) -> int:
        return POLLIN | POLLOUT

    def close(self) -> None:
        pass

    def stat_mode(self) -> tuple[int, int]:  # (st_mode, size)
        return 0o20620, 0


class Output(File):
    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.sink = sink

    def write(self, data: bytes) -> int:
        self.sink(data)
        return len(data)

    def read(self, n: int) -> bytes | int | None:
        return b""


class HostFile(File):
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, n: int) -> bytes | int | None:
        try:
            return os.read(self.fd, n)
        except OSError as e:
            return -(e.errno or E.EIO)

    def write(self, data: bytes) -> int:
        try:
            return os.write(self.fd, data)
        except OSError as e:
            return -(e.errno or E.EIO)

    def close(self) -> None:
        os.close(self.fd)

    def stat_mode(self) -> tuple[int, int]:
        st = os.fstat(self.fd)
        return st.st_mode, st.st_size


class SockFile(File):
    """A guest AF_UNIX stream socket backed by a host socket (never blocks the host)."""

    def __init__(self, sock: socket.socket, nonblock: bool = False) -> None:
        self.sock = sock
        sock.setblocking(False)
        self.nonblock = nonblock
        self.path: str | None = None

    def read(self, n: int) -> bytes | int | None:
        try:
            return self.sock.recv(n)
        except BlockingIOError:
            return None
        except OSError as e:
            return -(e.errno or E.EIO)

    def write(self, data: bytes) -> int:
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return -E.EAGAIN
        except OSError as e:
            return -(e.errno or E.EPIPE)

    def poll(self) -> int:
        try:
            r, w, x = select.select([self.sock], [self.sock], [self.sock], 0)
        except (OSError, ValueError):
            return POLLNVAL
        return (POLLIN if r else 0) | (POLLOUT if w else 0) | (POLLERR if x else 0)

    def close(self) -> None:
        self.sock.close()
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def stat_mode(self) -> tuple[int, int]:
        return 0o140777, 0


class LinuxABI:
    """The system-call layer of one XScale process."""

    def __init__(self, core: Guest, *, seed: int = 1,
                 echo: Callable[[int, bytes], None] | None = None) -> None:  # fmt: skip
        self.core = core
        self.uc = core.uc
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.echo = echo
        self.files: dict[int, File] = {
            0: Output(lambda b: None),
            1: Output(lambda b: self._out(1, b)),
            2: Output(lambda b: self._out(2, b)),
        }
        self.device: Any = None          # npkit.xscale.device.Ixp2800Device when attached
        self.maps: list[tuple[int, int, str]] = []   # (start, end, kind) in the mmap area
        self.unimplemented: dict[int, int] = {}
        self.guest_umask = 0o022
        self.log: list[str] = []
        self.me_mhz = 1400
        self._rng = (seed * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF
        self.table: dict[int, Callable[..., int | None]] = {}
        for nr, name in NAMES.items():
            fn = getattr(self, f"sys_{name.lstrip('_')}", None)
            if fn is not None:
                self.table[nr] = fn

    # ---- plumbing -------------------------------------------------------------------
    def _out(self, fd: int, data: bytes) -> None:
        (self.stdout if fd == 1 else self.stderr).extend(data)
        if self.echo is not None:
            self.echo(fd, data)

    def syscall(self) -> None:
        nr = int(self.uc.reg_read(A.UC_ARM_REG_R7))
        args = [int(self.uc.reg_read(A.UC_ARM_REG_R0 + i)) for i in range(6)]
        fn = self.table.get(nr)
        if fn is None:
            if nr not in self.unimplemented:
                msg = f"xscale: unimplemented system call {nr} ({NAMES.get(nr, 'unknown')}): -ENOSYS"
                self.log.append(msg)
                print(msg, file=sys.stderr)
            self.unimplemented[nr] = self.unimplemented.get(nr, 0) + 1
            self.uc.reg_write(A.UC_ARM_REG_R0, (-E.ENOSYS) & 0xFFFFFFFF)
            return
        try:
            res = fn(*args)
        except UcError:
            res = -E.EFAULT                     # a bad pointer from the program
        except OSError as e:
            res = -(e.errno or E.EIO)
        except (ValueError, struct.error, UnicodeError) as e:
            self.log.append(f"xscale: system call {nr} ({NAMES.get(nr, '?')}) rejected: {e}")
            res = -E.EINVAL
        if res is not None:
            self.uc.reg_write(A.UC_ARM_REG_R0, res & 0xFFFFFFFF)

    def _block(self, what: str, retry: Callable[[], int | None], *, deadline: int | None = None,
               irq: bool = False, host: bool = False) -> int | None:  # fmt: skip
        """Finish now when retry() has a result; otherwise sleep the core on it."""
        r = retry()
        if r is not None:
            return r
        self.core.block(Wait(what, retry, deadline, irq, host))
        return None

    def _file(self, fd: int) -> File | None:
        return self.files.get(fd if fd < 0x80000000 else -1)

    def _new_fd(self, f: File, lowest: int = 0) -> int:
        fd = lowest
        while fd in self.files:
            fd += 1
        self.files[fd] = f
        return fd

    def now_ns(self) -> int:
        return self.core.now_cycle() * 1000 // self.me_mhz

    def ns_to_cycle(self, ns: int) -> int:
        return -(-ns * self.me_mhz // 1000)

    def _timespec(self, addr: int, t64: bool) -> int:
        if t64:
            s, ns = struct.unpack("<qq", self.core.read(addr, 16))
        else:
            s, ns = struct.unpack("<ii", self.core.read(addr, 8))
        return s * 1_000_000_000 + ns

    def _put_timespec(self, addr: int, ns: int, t64: bool) -> None:
        s, frac = divmod(ns, 1_000_000_000)
        self.core.write(addr, struct.pack("<qq", s, frac) if t64 else struct.pack("<ii", s, frac))

    def _path(self, addr: int) -> str:
        """The host path of the guest path at `addr`."""
        return self._host_path(self.core.cstring(addr))

    def _host_path(self, p: str) -> str:
        """The host path of guest path `p` (through the core's mounts): files and Unix
        sockets alike."""
        for guest, host in self.core.mounts.items():
            if p == guest or p.startswith(guest + "/"):
                return str(host) + p[len(guest) :]
        return p

    # ---- process ----------------------------------------------------------------------
    def sys_exit(self, code: int, *_: int) -> None:
        self.core.exit(code & 0xFF)

    sys_exit_group = sys_exit

    def sys_set_tls(self, value: int, *_: int) -> int:
        self.core.write(TLS_SLOT, struct.pack("<I", value))
        self.tls = value
        return 0

    def sys_cacheflush(self, *_: int) -> int:
        return 0

    def sys_set_tid_address(self, *_: int) -> int:
        return 1

    def sys_getpid(self, *_: int) -> int:
        return 1

    sys_gettid = sys_getpid

    def sys_getppid(self, *_: int) -> int:
        return 0

    def sys_getuid32(self, *_: int) -> int:
        return 0

    sys_getgid32 = sys_geteuid32 = sys_getegid32 = sys_getuid32

    def sys_set_robust_list(self, *_: int) -> int:
        return 0

    def sys_rseq(self, *_: int) -> int:
        return -E.ENOSYS     # a kernel without restartable sequences: glibc carries on

    def sys_statx(self, *_: int) -> int:
        return -E.ENOSYS     # glibc falls back to fstatat64

    sys_rt_sigaction = sys_rt_sigprocmask = sys_sigaltstack = sys_set_robust_list
    sys_madvise = sys_sched_yield = sys_set_robust_list

    def sys_tgkill(self, *a: int) -> None:
        sig = a[2]
        self.core.fault = f"killed by signal {sig}"
        self.core.exit(128 + sig)

    def sys_kill(self, pid: int, sig: int, *_: int) -> int | None:
        if sig == 0:
            return 0
        self.core.fault = f"killed by signal {sig}"
        self.core.exit(128 + sig)
        return None

    def sys_tkill(self, tid: int, sig: int, *_: int) -> None:
        self.sys_kill(tid, sig)

    def sys_ugetrlimit(self, res: int, addr: int, *_: int) -> int:
        lim = (8 << 20, 0xFFFFFFFF) if res == 3 else (0xFFFFFFFF, 0xFFFFFFFF)
        self.core.write(addr, struct.pack("<II", *lim))
        return 0

    def sys_prlimit64(self, pid: int, res: int, new: int, old: int, *_: int) -> int:
        if old:
            lim = (8 << 20, (1 << 64) - 1) if res == 3 else ((1 << 64) - 1, (1 << 64) - 1)
            self.core.write(old, struct.pack("<QQ", *lim))
        return 0

    def sys_uname(self, addr: int, *_: int) -> int:
        fields = [b"Linux", b"ixp2800", b"6.1.0-npkit", b"#1 npkit", b"armv5tel", b"(none)"]
        self.core.write(addr, b"".join(f.ljust(65, b"\0") for f in fields))
        return 0

    def sys_sched_getaffinity(self, pid: int, size: int, addr: int, *_: int) -> int:
        self.core.write(addr, b"\x01" + b"\0" * (min(size, 128) - 1))
        return min(size, 4)

    def sys_sysinfo(self, addr: int, *_: int) -> int:
        self.core.write(addr, struct.pack("<i", self.now_ns() // 1_000_000_000) + b"\0" * 60)
        return 0

    def sys_getrandom(self, buf: int, n: int, *_: int) -> int:
        out = bytearray()
        while len(out) < n:
            x = self._rng
            x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
            x ^= x >> 7
            x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
            self._rng = x
            out += x.to_bytes(8, "little")
        self.core.write(buf, bytes(out[:n]))
        return n

    def sys_getcwd(self, buf: int, size: int, *_: int) -> int:
        cwd = os.getcwd().encode() + b"\0"
        if len(cwd) > size:
            return -E.ERANGE
        self.core.write(buf, cwd)
        return len(cwd)

    def sys_readlink(self, path: int, buf: int, size: int, *_: int) -> int:
        p = self._path(path)
        if p == "/proc/self/exe":
            target = self.core.guest_path.encode()  # as argv[0]: not the host's checkout
        else:
            try:
                target = os.fsencode(os.readlink(p))
            except OSError as e:
                return -(e.errno or E.EINVAL)
        self.core.write(buf, target[:size])
        return min(len(target), size)

    def sys_readlinkat(self, dirfd: int, path: int, buf: int, size: int, *_: int) -> int:
        return self.sys_readlink(path, buf, size)

    # ---- memory ---------------------------------------------------------------------------
    def sys_brk(self, new: int, *_: int) -> int:
        core = self.core
        if new <= core.brk_base:
            return core.brk
        top_old, top_new = page_up(core.brk), page_up(new)
        if top_new > top_old:
            try:
                core.uc.mem_map(top_old, top_new - top_old, U.UC_PROT_READ | U.UC_PROT_WRITE)
            except UcError:
                return core.brk
        core.brk = new
        return new

    def alloc_va(self, size: int, fixed: int | None = None) -> int | None:
        size = page_up(size)
        if fixed is not None:
            return fixed
        cur = MMAP_BASE
        for start, end, _k in sorted(self.maps):
            if start - cur >= size:
                break
            cur = max(cur, end)
        return cur if cur + size <= MMAP_END else None

    def sys_mmap2(self, addr: int, length: int, prot: int, flags: int, fd: int, pgoff: int) -> int:
        if length == 0:
            return -E.EINVAL
        size = page_up(length)
        fixed = addr if flags & 0x10 else None
        if fixed is not None:
            self._unmap(fixed, size)
        va = self.alloc_va(size, fixed)
        if va is None:
            return -E.ENOMEM
        perms = (U.UC_PROT_READ if prot & 1 else 0) | (U.UC_PROT_WRITE if prot & 2 else 0) | (
            U.UC_PROT_EXEC if prot & 4 else 0)
        if not flags & 0x20:     # file or device mapping
            f = self._file(fd)
            if f is None:
                return -E.EBADF
            if self.device is not None and f is self.device.file:
                rc = self.device.mmap(va, size, pgoff * PAGE)
                if rc < 0:
                    return rc
                self.maps.append((va, va + size, "device"))
                return va
            if not isinstance(f, HostFile):
                return -E.ENODEV
            data = os.pread(f.fd, length, pgoff * PAGE)
        else:
            data = b""
        try:
            self.uc.mem_map(va, size, perms or U.UC_PROT_READ)
        except UcError:
            return -E.ENOMEM
        if data:
            self.uc.mem_write(va, data)
        self.maps.append((va, va + size, "anon"))
        return va

    def _unmap(self, addr: int, size: int) -> None:
        end = addr + page_up(size)
        keep = []
        for start, stop, kind in self.maps:
            if stop <= addr or start >= end:
                keep.append((start, stop, kind))
                continue
            if kind == "device":
                self.device.munmap(start, stop - start)
                continue
            lo, hi = max(start, addr), min(stop, end)
            self.uc.mem_unmap(lo, hi - lo)
            if start < lo:
                keep.append((start, lo, kind))
            if hi < stop:
                keep.append((hi, stop, kind))
        self.maps = keep

    def sys_munmap(self, addr: int, length: int, *_: int) -> int:
        self._unmap(addr, length)
        return 0

    def sys_mremap(self, addr: int, old_size: int, new_size: int, flags: int, *_: int) -> int:
        """Resize an anonymous mapping (glibc's realloc of a large block): shrunk or grown
        in place when the pages after it are free, else moved with MREMAP_MAYMOVE (1),
        its bytes copied.  A device mapping, MREMAP_FIXED (2) or a range that is not
        one whole mapping's start is EINVAL; no room, ENOMEM."""
        old, new = page_up(old_size), page_up(new_size)
        if addr % PAGE or not new or flags & ~1:
            return -E.EINVAL
        entry = next((m for m in self.maps if m[0] == addr and m[1] - m[0] == old and m[2] == "anon"), None)
        if entry is None:
            return -E.EINVAL if any(m[0] <= addr < m[1] for m in self.maps) else -E.EFAULT
        if new <= old:
            self._unmap(addr + new, old - new)
            return addr
        perms = next((p for lo, hi, p in self.uc.mem_regions() if lo <= addr <= hi), U.UC_PROT_READ)
        end, grown = addr + old, addr + new
        if grown <= MMAP_END and not any(lo < grown and hi > end for lo, hi, _k in self.maps):
            try:
                self.uc.mem_map(end, new - old, perms)
            except UcError:
                return -E.ENOMEM
            self.maps[self.maps.index(entry)] = (addr, grown, "anon")
            return addr
        if not flags & 1:
            return -E.ENOMEM
        va = self.alloc_va(new)
        if va is None:
            return -E.ENOMEM
        try:
            self.uc.mem_map(va, new, perms)
        except UcError:
            return -E.ENOMEM
        self.uc.mem_write(va, bytes(self.uc.mem_read(addr, old)))
        self._unmap(addr, old)
        self.maps.append((va, va + new, "anon"))
        return va

    def sys_mprotect(self, addr: int, length: int, prot: int, *_: int) -> int:
        perms = (1 if prot & 1 else 0) | (2 if prot & 2 else 0) | (4 if prot & 4 else 0)
        try:
            self.uc.mem_protect(addr, page_up(length), perms or U.UC_PROT_READ)
        except UcError:
            pass
        return 0

    # ---- files ------------------------------------------------------------------------------
    def sys_open(self, path: int, flags: int, mode: int, *_: int) -> int:
        return self.sys_openat(-100, path, flags, mode)

    def sys_openat(self, dirfd: int, path: int, flags: int, mode: int, *_: int) -> int:
        p = self._path(path)
        if p in ("/dev/ixp2800", "/dev/mem", "/dev/uio0"):
            if self.device is None:
                return -E.ENOENT
            return self._new_fd(self.device.open())
        try:
            fd = os.open(p, _host_flags(flags) | os.O_CLOEXEC, mode or 0o644)
        except OSError as e:
            return -(e.errno or E.EIO)
        return self._new_fd(HostFile(fd), 3)

    def sys_close(self, fd: int, *_: int) -> int:
        f = self.files.pop(fd, None)
        if f is None:
            return -E.EBADF
        if f not in self.files.values():
            f.close()
        return 0

    def sys_dup(self, fd: int, *_: int) -> int:
        f = self._file(fd)
        return -E.EBADF if f is None else self._new_fd(f)

    def sys_dup3(self, fd: int, new: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        self.files[new] = f
        return new

    def sys_read(self, fd: int, buf: int, n: int, *_: int) -> int | None:
        f = self._file(fd)
        if f is None:
            return -E.EBADF

        def retry() -> int | None:
            data = f.read(n)
            if data is None:
                return -E.EAGAIN if f.nonblock else None
            if isinstance(data, int):
                return data
            self.core.write(buf, data)
            return len(data)

        is_dev = self.device is not None and f is self.device.file
        return self._block(f"read fd {fd}" + (" (interrupt)" if is_dev else ""), retry,
                           irq=is_dev, host=not is_dev)  # fmt: skip

    def sys_write(self, fd: int, buf: int, n: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        return f.write(self.core.read(buf, n)) if n else 0

    def sys_writev(self, fd: int, iov: int, cnt: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        data = b""
        for i in range(cnt):
            base, ln = struct.unpack("<II", self.core.read(iov + 8 * i, 8))
            data += self.core.read(base, ln) if ln else b""
        return f.write(data) if data else 0

    def sys_lseek(self, fd: int, off: int, whence: int, *_: int) -> int:
        f = self._file(fd)
        if not isinstance(f, HostFile):
            return -E.ESPIPE
        off = off - (1 << 32) if off & 0x80000000 else off
        return os.lseek(f.fd, off, whence)

    def sys_llseek(self, fd: int, hi: int, lo: int, res: int, whence: int, *_: int) -> int:
        f = self._file(fd)
        if not isinstance(f, HostFile):
            return -E.ESPIPE
        pos = os.lseek(f.fd, ((hi << 32) | lo) - ((1 << 64) if hi & 0x80000000 else 0), whence)
        self.core.write(res, struct.pack("<q", pos))
        return 0

    def sys_ioctl(self, fd: int, req: int, arg: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        if req == 0x5401 and isinstance(f, Output) and fd in (1, 2):   # TCGETS: a terminal
            # the kernel's struct termios: c_iflag, c_oflag, c_cflag, c_lflag, c_line, c_cc[19] (36 bytes)
            self.core.write(arg, struct.pack("<IIIIB19s", 0x500, 0x5, 0xBF, 0x8A3B, 0, b"\0" * 19))
            return 0
        return -E.ENOTTY

    def sys_fcntl64(self, fd: int, cmd: int, arg: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        if cmd == 3:   # F_GETFL
            return 2 | (O_NONBLOCK if f.nonblock else 0)
        if cmd == 4:   # F_SETFL
            f.nonblock = bool(arg & O_NONBLOCK)
            return 0
        if cmd in (1, 2):  # F_GETFD / F_SETFD
            return 0
        if cmd in (0, 1030):   # F_DUPFD, F_DUPFD_CLOEXEC
            return self._new_fd(f, arg)
        return -E.EINVAL

    def _stat64(self, mode: int, size: int, ino: int = 1) -> bytes:
        b = bytearray(104)
        struct.pack_into("<Q", b, 0, 0x0B)
        struct.pack_into("<IIIII", b, 12, ino & 0xFFFFFFFF, mode, 1, 0, 0)
        struct.pack_into("<q", b, 48, size)
        struct.pack_into("<I", b, 56, PAGE)
        struct.pack_into("<Q", b, 64, (size + 511) // 512)
        struct.pack_into("<Q", b, 96, ino)
        return bytes(b)

    def sys_fstat64(self, fd: int, addr: int, *_: int) -> int:
        f = self._file(fd)
        if f is None:
            return -E.EBADF
        mode, size = f.stat_mode()
        self.core.write(addr, self._stat64(mode, size, fd + 1))
        return 0

    def sys_stat64(self, path: int, addr: int, *_: int) -> int:
        try:
            st = os.stat(self._path(path))
        except OSError as e:
            return -(e.errno or E.ENOENT)
        self.core.write(addr, self._stat64(st.st_mode, st.st_size, st.st_ino))
        return 0

    sys_lstat64 = sys_stat64

    def sys_fstatat64(self, dirfd: int, path: int, addr: int, flags: int, *_: int) -> int:
        if flags & 0x1000 and not self.core.read(path, 1)[0]:   # AT_EMPTY_PATH
            return self.sys_fstat64(dirfd, addr)
        return self.sys_stat64(path, addr)

    def sys_access(self, path: int, mode: int, *_: int) -> int:
        return 0 if os.access(self._path(path), mode or os.F_OK) else -E.ENOENT

    def sys_faccessat(self, dirfd: int, path: int, mode: int, *_: int) -> int:
        return self.sys_access(path, mode)

    def sys_unlink(self, path: int, *_: int) -> int:
        try:
            os.unlink(self._path(path))
        except OSError as e:
            return -(e.errno or E.ENOENT)
        return 0

    def sys_unlinkat(self, dirfd: int, path: int, *_: int) -> int:
        return self.sys_unlink(path)

    def sys_rename(self, old: int, new: int, *_: int) -> int:
        try:
            os.replace(self._path(old), self._path(new))
        except OSError as e:
            return -(e.errno or E.ENOENT)
        return 0

    def sys_renameat(self, olddir: int, old: int, newdir: int, new: int, *_: int) -> int:
        return self.sys_rename(old, new)

    def sys_renameat2(self, olddir: int, old: int, newdir: int, new: int, flags: int, *_: int) -> int:
        return -E.EINVAL if flags else self.sys_rename(old, new)

    # ---- time -------------------------------------------------------------------------------
    def _clock(self, clk: int, addr: int, t64: bool) -> int:
        ns = self.now_ns() + (EPOCH_S * 1_000_000_000 if clk in (0, 5, 8, 11) else 0)
        self._put_timespec(addr, ns, t64)
        return 0

    def sys_clock_gettime(self, clk: int, addr: int, *_: int) -> int:
        return self._clock(clk, addr, False)

    def sys_clock_gettime64(self, clk: int, addr: int, *_: int) -> int:
        return self._clock(clk, addr, True)

    def sys_clock_getres(self, clk: int, addr: int, *_: int) -> int:
        if addr:
            self._put_timespec(addr, 1, False)
        return 0

    def sys_clock_getres_time64(self, clk: int, addr: int, *_: int) -> int:
        if addr:
            self._put_timespec(addr, 1, True)
        return 0

    def sys_gettimeofday(self, tv: int, tz: int, *_: int) -> int:
        if tv:
            us = self.now_ns() // 1000 + EPOCH_S * 1_000_000
            self.core.write(tv, struct.pack("<ii", *divmod(us, 1_000_000)))
        return 0

    def _sleep_until(self, what: str, deadline_ns: int, rem: int = 0, t64: bool = False) -> int | None:
        deadline = self.ns_to_cycle(deadline_ns)

        def retry() -> int | None:
            if self.core.now_cycle() < deadline:
                return None
            if rem:
                self._put_timespec(rem, 0, t64)
            return 0

        return self._block(what, retry, deadline=deadline)

    def sys_nanosleep(self, req: int, rem: int, *_: int) -> int | None:
        ns = self._timespec(req, False)
        return self._sleep_until(f"nanosleep {ns} ns", self.now_ns() + ns, rem)

    def _clock_nanosleep(self, clk: int, flags: int, req: int, rem: int, t64: bool) -> int | None:
        ns = self._timespec(req, t64)
        if flags & 1:    # TIMER_ABSTIME
            ns -= EPOCH_S * 1_000_000_000 if clk in (0, 5, 8, 11) else 0
        else:
            ns += self.now_ns()
        return self._sleep_until("clock_nanosleep", ns, 0 if flags & 1 else rem, t64)

    def sys_clock_nanosleep(self, clk: int, flags: int, req: int, rem: int, *_: int) -> int | None:
        return self._clock_nanosleep(clk, flags, req, rem, False)

    def sys_clock_nanosleep_time64(self, clk: int, flags: int, req: int, rem: int, *_: int) -> int | None:
        return self._clock_nanosleep(clk, flags, req, rem, True)

    # ---- poll -------------------------------------------------------------------------------
    def _poll(self, fds: int, nfds: int, timeout_ns: int | None) -> int | None:
        entries = [struct.unpack("<ihh", self.core.read(fds + 8 * i, 8)) for i in range(nfds)]
        deadline = None if timeout_ns is None else self.ns_to_cycle(self.now_ns() + timeout_ns)
        dev_file = self.device.file if self.device is not None else None

        def ready() -> int | None:
            revs = []
            for fd, ev, _r in entries:
                f = self._file(fd) if fd >= 0 else None
                revs.append(0 if fd < 0 else POLLNVAL if f is None else f.poll() & (ev | POLLERR | POLLHUP | POLLNVAL))
            n = sum(1 for rev in revs if rev)
            if not n and (deadline is None or self.core.now_cycle() < deadline):
                return None  # still blocked: the program sees revents only when poll returns
            for i, rev in enumerate(revs):
                self.core.write(fds + 8 * i + 6, struct.pack("<h", rev))
            return n

        files = [self._file(fd) for fd, _e, _r in entries if fd >= 0]
        irq = any(f is dev_file and f is not None for f in files)
        host = any(isinstance(f, SockFile | HostFile) for f in files)
        if timeout_ns == 0:
            r = ready()
            return 0 if r is None else r
        return self._block(f"poll {nfds} fds", ready, deadline=deadline, irq=irq, host=host)

    def sys_poll(self, fds: int, nfds: int, timeout: int, *_: int) -> int | None:
        t = timeout - (1 << 32) if timeout & 0x80000000 else timeout
        return self._poll(fds, nfds, None if t < 0 else t * 1_000_000)

    def sys_ppoll(self, fds: int, nfds: int, ts: int, *_: int) -> int | None:
        return self._poll(fds, nfds, None if not ts else self._timespec(ts, False))

    def sys_ppoll_time64(self, fds: int, nfds: int, ts: int, *_: int) -> int | None:
        return self._poll(fds, nfds, None if not ts else self._timespec(ts, True))

    # ---- Unix-domain sockets, bridged to host Unix sockets ---------------------------------
    def _sockaddr(self, addr: int, length: int) -> str | None:
        raw = self.core.read(addr, min(length, 110))
        if len(raw) < 2 or struct.unpack_from("<H", raw)[0] != socket.AF_UNIX:
            return None
        return self._host_path(raw[2:].split(b"\0", 1)[0].decode(errors="replace"))

    def _sock(self, fd: int) -> SockFile | None:
        f = self._file(fd)
        return f if isinstance(f, SockFile) else None

    def sys_socket(self, family: int, typ: int, proto: int, *_: int) -> int:
        if family != socket.AF_UNIX:
            return -E.EAFNOSUPPORT
        if typ & 0xF != socket.SOCK_STREAM:
            return -E.EPROTONOSUPPORT
        return self._new_fd(SockFile(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), bool(typ & O_NONBLOCK)))

    def _sock_at(self, fd: int, addr: int, length: int) -> tuple[SockFile, str] | int:
        """The socket of fd and the Unix path at addr, or -errno."""
        s, path = self._sock(fd), self._sockaddr(addr, length)
        if s is None:
            return -E.ENOTSOCK
        return -E.EAFNOSUPPORT if path is None else (s, path)

    def sys_bind(self, fd: int, addr: int, length: int, *_: int) -> int:
        got = self._sock_at(fd, addr, length)
        if isinstance(got, int):
            return got
        s, path = got
        try:
            s.sock.bind(path)
        except OSError as e:
            return -(e.errno or E.EADDRINUSE)
        s.path = path
        try:  # the socket file's mode, as the guest's umask makes it (a kernel's bind does)
            os.chmod(path, 0o777 & ~self.guest_umask)
        except OSError:
            pass
        return 0

    def sys_ftruncate(self, fd: int, length: int, *_: int) -> int:
        f = self.files.get(fd)
        if not isinstance(f, HostFile):
            return -E.EINVAL if f is not None else -E.EBADF
        try:
            os.ftruncate(f.fd, length)
        except OSError as e:
            return -(e.errno or E.EIO)
        return 0

    def sys_ftruncate64(self, fd: int, _pad: int, lo: int, hi: int, *_: int) -> int:
        return self.sys_ftruncate(fd, hi << 32 | lo)   # EABI: the 64-bit length in an even register pair

    def sys_umask(self, mask: int, *_: int) -> int:
        old, self.guest_umask = self.guest_umask, mask & 0o777
        return old

    def sys_listen(self, fd: int, backlog: int, *_: int) -> int:
        s = self._sock(fd)
        if s is None:
            return -E.ENOTSOCK
        s.sock.listen(backlog or 1)
        return 0

    def sys_connect(self, fd: int, addr: int, length: int, *_: int) -> int:
        got = self._sock_at(fd, addr, length)
        if isinstance(got, int):
            return got
        s, path = got
        try:
            s.sock.setblocking(True)
            s.sock.connect(path)
        except OSError as e:
            return -(e.errno or E.ECONNREFUSED)
        finally:
            s.sock.setblocking(False)
        return 0

    def sys_accept4(self, fd: int, addr: int, lenp: int, flags: int, *_: int) -> int | None:
        s = self._sock(fd)
        if s is None:
            return -E.ENOTSOCK

        def retry() -> int | None:
            try:
                conn, _a = s.sock.accept()
            except BlockingIOError:
                return -E.EAGAIN if s.nonblock else None
            except OSError as e:
                return -(e.errno or E.EINVAL)
            if addr and lenp:
                self.core.write(addr, struct.pack("<H", socket.AF_UNIX))
                self.core.write(lenp, struct.pack("<I", 2))
            return self._new_fd(SockFile(conn, bool(flags & O_NONBLOCK)))

        return self._block(f"accept fd {fd}", retry, host=True)

    def sys_accept(self, fd: int, addr: int, lenp: int, *_: int) -> int | None:
        return self.sys_accept4(fd, addr, lenp, 0)

    def sys_send(self, fd: int, buf: int, n: int, *_: int) -> int:
        return self.sys_write(fd, buf, n)

    def sys_sendto(self, fd: int, buf: int, n: int, *_: int) -> int:
        return self.sys_write(fd, buf, n)

    def sys_recv(self, fd: int, buf: int, n: int, flags: int, *_: int) -> int | None:
        s = self._sock(fd)
        if s is None:
            return -E.ENOTSOCK
        if flags & 0x40:    # MSG_DONTWAIT
            data = s.read(n)
            if data is None:
                return -E.EAGAIN
            if isinstance(data, int):
                return data
            self.core.write(buf, data)
            return len(data)
        return self.sys_read(fd, buf, n)

    def sys_recvfrom(self, fd: int, buf: int, n: int, flags: int, *_: int) -> int | None:
        return self.sys_recv(fd, buf, n, flags)

    def sys_shutdown(self, fd: int, how: int, *_: int) -> int:
        s = self._sock(fd)
        if s is None:
            return -E.ENOTSOCK
        try:
            s.sock.shutdown(how)
        except OSError as e:
            return -(e.errno or E.ENOTCONN)
        return 0

    def sys_setsockopt(self, *_: int) -> int:
        return 0

    def sys_getsockopt(self, fd: int, level: int, opt: int, val: int, lenp: int, *_: int) -> int:
        if val:
            self.core.write(val, struct.pack("<i", 0))
        return 0

    def sys_getsockname(self, fd: int, addr: int, lenp: int, *_: int) -> int:
        s = self._sock(fd)
        if s is None:
            return -E.ENOTSOCK
        path = (s.path or "").encode()
        self.core.write(addr, struct.pack("<H", socket.AF_UNIX) + path + b"\0")
        self.core.write(lenp, struct.pack("<I", 3 + len(path)))
        return 0

    def host_pending(self) -> bool:
        """True when a host socket the core may wait on has something (cheap check)."""
        socks = [f.sock for f in self.files.values() if isinstance(f, SockFile)]
        if not socks:
            return False
        try:
            r, _w, _x = select.select(socks, [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)

    def close_all(self) -> None:
        for fd in list(self.files):
            if fd > 2:
                self.sys_close(fd)
