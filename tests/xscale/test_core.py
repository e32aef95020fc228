"""The XScale core and its Linux layer: same output as qemu-arm, budget hook,
system calls, deterministic time and randomness."""

from __future__ import annotations

import errno
import struct
import subprocess
from pathlib import Path

import pytest
from unicorn import arm_const as A

from npkit.xscale.core import HWCAP, STACK_TOP, XScaleCore
from npkit.xscale.elf import ElfError, read_elf

from .conftest import DEMO_GPE


def _finish(core: XScaleCore, quantum: int = 100_000) -> None:
    for _ in range(100_000):
        if core.state != "running":
            return
        core.run(quantum)
    raise AssertionError("program did not finish")


def test_compute_part_matches_qemu_and_native(xscale_built: Path) -> None:
    qemu = subprocess.run(["qemu-arm", "-cpu", "pxa255", str(xscale_built), "compute"], capture_output=True,
                          timeout=60)  # fmt: skip
    assert qemu.returncode == 0, qemu.stderr
    core = XScaleCore(xscale_built, ["compute"])
    _finish(core)
    assert core.state == "exited" and core.exit_code == 0
    assert bytes(core.linux.stdout) == qemu.stdout
    assert b"crc32 2c327620" in qemu.stdout          # the same numbers on the host (gpe build)
    native = subprocess.run([str(DEMO_GPE), "compute"], capture_output=True, timeout=60)
    assert native.stdout == qemu.stdout


def test_instruction_count_does_not_depend_on_the_quantum(xscale_built: Path) -> None:
    counts = set()
    for q in (7, 1000, 1_000_000):
        core = XScaleCore(xscale_built, ["spin", "3000"])
        _finish(core, q)
        assert bytes(core.linux.stdout).startswith(b"spin 3000 ")
        counts.add(core.instructions)
    assert len(counts) == 1


def test_instruction_count_does_not_depend_on_where_the_program_lives(xscale_built: Path, tmp_path: Path) -> None:
    """The same program from two host directories runs the same instructions: the guest
    sees a fixed argv[0] (the C library's start-up reads it), not the checkout's path."""
    counts = set()
    for where in (tmp_path / "a", tmp_path / "bb" / "c"):
        where.mkdir(parents=True)
        elf = where / xscale_built.name
        elf.write_bytes(xscale_built.read_bytes())
        core = XScaleCore(elf, ["spin", "300"])
        assert core.cstring(struct.unpack("<2I", core.read(core.reg(13), 8))[1]) == "/usr/sbin/" + elf.name
        _finish(core)
        counts.add(core.instructions)
    assert len(counts) == 1


def test_process_image_auxv_and_kuser_helpers(xscale_built: Path) -> None:
    core = XScaleCore(xscale_built, ["a1", "b2"], {"K": "V"})
    sp = core.reg(13)
    argc, *rest = struct.unpack("<8I", core.read(sp, 32))
    assert argc == 3 and core.cstring(rest[1]) == "a1" and core.cstring(rest[2]) == "b2" and rest[3] == 0
    assert core.cstring(rest[4]) == "K=V" and rest[5] == 0
    words = struct.unpack("<38I", core.read(sp + 28, 152))
    aux = dict(zip(words[0::2], words[1::2], strict=True))
    assert aux[6] == 4096 and aux[9] == core.elf.entry and aux[5] == core.elf.phnum
    assert aux[16] == HWCAP and not aux[16] & (64 | 512)        # no VFP, no iWMMXt
    assert core.cstring(aux[15]) == "v5l" and sp < aux[25] < STACK_TOP
    # get_tls returns what set_tls stored; cmpxchg swaps only on a match
    core.linux.sys_set_tls(0x1234)
    assert struct.unpack("<I", core.read(0xFFFF0FF0, 4))[0] == 0x1234
    assert core.read(0xFFFF0FE0, 8) == struct.pack("<II", 0xE59F0008, 0xE12FFF1E)


def test_unimplemented_call_is_enosys_and_logged_once(xscale_built: Path) -> None:
    core = XScaleCore(xscale_built, [])
    for _ in range(3):
        core.uc.reg_write(A.UC_ARM_REG_R7, 120)       # clone: no threads here
        core.linux.syscall()
        assert core.reg(0) == (-errno.ENOSYS) & 0xFFFFFFFF
    assert core.linux.unimplemented == {120: 3}
    assert core.linux.log == ["xscale: unimplemented system call 120 (clone): -ENOSYS"]
    assert core.state == "running"


def test_time_is_emulated_and_sleep_blocks_until_the_deadline(xscale_built: Path) -> None:
    core = XScaleCore(xscale_built, [], ratio=2)
    lx = core.linux
    core.cycle = 1400 * 1000          # 1 ms of ME cycles at 1.4 GHz
    lx.sys_clock_gettime64(1, STACK_TOP - 64)
    assert struct.unpack("<qq", core.read(STACK_TOP - 64, 16)) == (0, 1_000_000)
    core.write(STACK_TOP - 32, struct.pack("<ii", 0, 500_000))        # 0.5 ms
    assert lx.sys_nanosleep(STACK_TOP - 32, 0) is None
    assert core.state == "waiting" and core.wait is not None
    deadline = core.wait.deadline
    assert deadline == 1400 * 1500 and core.wait.retry() is None
    core.cycle = deadline
    assert core.wait.retry() == 0


def test_getrandom_is_deterministic(xscale_built: Path) -> None:
    vals = []
    for _ in range(2):
        core = XScaleCore(xscale_built, [], seed=7)
        core.linux.sys_getrandom(STACK_TOP - 64, 16)
        vals.append(core.read(STACK_TOP - 64, 16))
    assert vals[0] == vals[1] and len(set(vals[0])) > 4


def test_unix_socket_bridged_to_the_host(xscale_built: Path, tmp_path: Path) -> None:
    import socket

    core = XScaleCore(xscale_built, [])
    lx = core.linux
    path = str(tmp_path / "ctl.sock")
    buf = STACK_TOP - 256
    core.write(buf, struct.pack("<H", socket.AF_UNIX) + path.encode() + b"\0")
    fd = lx.sys_socket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
    assert lx.sys_bind(fd, buf, 110) == 0 and lx.sys_listen(fd, 4) == 0
    assert lx.sys_accept(fd, 0, 0) is None and core.state == "waiting"   # nobody yet: the core sleeps
    wait = core.wait
    assert wait is not None and wait.host
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cli.connect(path)
    conn = wait.retry()
    assert isinstance(conn, int) and conn > fd
    cli.sendall(b"route add")
    assert lx.sys_recv(conn, buf, 64, 0) == 9 and core.read(buf, 9) == b"route add"
    core.write(buf, b"ok\n")
    assert lx.sys_send(conn, buf, 3) == 3 and cli.recv(16) == b"ok\n"
    cli.close()
    lx.close_all()


def test_read_elf_rejects_non_arm_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.elf"
    bad.write_bytes(b"not an elf")
    with pytest.raises(ElfError, match="not an ELF"):
        read_elf(bad)
    with pytest.raises(ElfError, match="32-bit"):
        read_elf(DEMO_GPE)                       # the x86-64 (gpe) build of the same program


def test_arm_build_is_tagged_v5te_for_the_xscale(xscale_built: Path) -> None:
    out = subprocess.run(["arm-linux-gnueabi-readelf", "-A", str(xscale_built)], capture_output=True, text=True)
    assert "Tag_CPU_arch: v5TE" in out.stdout
    assert "Tag_FP_arch" not in out.stdout and "WMMX" not in out.stdout


def test_armv6_instruction_faults_on_the_xscale(tmp_path: Path) -> None:
    from npkit.xscale.toolchain import build

    src = tmp_path / "v6.c"
    src.write_text('int main(void) { __asm__ volatile(".arch armv6\\n\\trev r0, r0" ::: "r0"); return 0; }\n')
    elf = build([src], tmp_path / "v6.elf")
    core = XScaleCore(elf, [])
    _finish(core)
    assert core.state == "crashed" and "illegal instruction (SIGILL)" in (core.fault or "")
    assert core.exit_code == 128 + 4
    assert core.where() == "main"


def test_mremap_grows_in_place_moves_and_shrinks(xscale_built: Path) -> None:
    """glibc's realloc of a large block calls mremap: it was ENOSYS (npkd printed
    "unimplemented system call 163 (mremap)" on a /0 route change and realloc fell back
    to copying).  Grown in place when the pages after are free, moved with its bytes
    (MREMAP_MAYMOVE) when not, shrunk in place; what it cannot do is an error."""
    core = XScaleCore(xscale_built, [])
    lx = core.linux
    page = 4096
    a = lx.sys_mmap2(0, 2 * page, 3, 0x22, -1, 0)            # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    assert a > 0
    core.uc.mem_write(a, b"npkit" * 100)
    assert lx.sys_mremap(a, 2 * page, 4 * page, 0) == a      # in place: the next pages are free
    core.uc.mem_write(a + 3 * page, b"top")
    blocker = lx.sys_mmap2(a + 4 * page, page, 3, 0x32, -1, 0)   # MAP_FIXED right after it
    assert blocker == a + 4 * page
    assert lx.sys_mremap(a, 4 * page, 8 * page, 0) == -errno.ENOMEM    # no room, may not move
    b = lx.sys_mremap(a, 4 * page, 8 * page, 1)                         # MREMAP_MAYMOVE
    assert b > 0 and b != a
    assert bytes(core.uc.mem_read(b, 500)) == b"npkit" * 100 and bytes(core.uc.mem_read(b + 3 * page, 3)) == b"top"
    assert not any(lo <= a < hi for lo, hi, _k in lx.maps)             # the old pages are gone
    core.uc.mem_write(b + 7 * page, b"end")                             # the new ones are there
    assert lx.sys_mremap(b, 8 * page, page, 1) == b                     # shrunk in place
    assert (b, b + page, "anon") in lx.maps
    assert lx.sys_mremap(b, page, 2 * page, 2) == -errno.EINVAL        # MREMAP_FIXED: not supported
    assert lx.sys_mremap(b + 1, page, 2 * page, 1) == -errno.EINVAL    # not page aligned
    assert lx.sys_mremap(0x7000_0000, page, 2 * page, 1) == -errno.EFAULT   # nothing mapped there
    assert 163 in lx.table and not lx.unimplemented
