"""An XScale program that does not finish, a broken ELF, a device access the chip
refuses, a gpe process that never reaches the device, and a router's control daemon
that crashed or hangs: each is reported as what it is (the program's fault, its pc and
function), with a meaningful exit code and never a Python traceback."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.emulator.binding import Chip
from npkit.toolchain.cli import main
from npkit.toolchain.commands.xscale import co_run
from npkit.toolchain.system.router_run import RouterRun, format_summary
from npkit.xscale.core import XScaleError
from npkit.xscale.device import SRAM_QUEUE, ChipWindows, DeviceFault
from npkit.xscale.elf import ElfError, read_elf
from npkit.xscale.toolchain import build

from .conftest import DEMO_ELF
from .test_control_plane import traffic_of

# mode: argv[1], or (started as a router's control daemon, whose arguments are its
# options and config file) the name the program was installed under
FAULTS_C = r"""
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <arpa/inet.h>
#include "npk_xscale.h"

static int is(const char *mode, const char *name) { return strstr(mode, name) != NULL; }

int main(int argc, char **argv) {
    const char *mode = argc > 1 && argv[1][0] != '-' && !strstr(argv[1], ".conf") ? argv[1] : argv[0];
    if (is(mode, "segv")) { volatile uintptr_t a = 0x10; return *(volatile int *)a; }
    if (is(mode, "spin")) { volatile unsigned x = 0; for (;;) x++; }
    npk_dev d;
    if (npk_dev_open(&d) != 0) return 2;
    if (is(mode, "wait")) { uint32_t n; return (int)read(d.fd, &n, 4); }
    if (is(mode, "qget")) {            /* queue 0x100: head outside SRAM, count 1 */
        volatile uint32_t *s = npk_dev_map(&d, npk_xs_sram_phys(0, 0), 4096);
        s[0x40] = htonl(0x3FFFFFF0u); s[0x42] = htonl(1);
        printf("got %x\n", npk_queue_get(&d, 0x100));
    }
    if (is(mode, "ringcfg")) {         /* ring 2 configured past the end of scratch */
        npk_csr_write(&d, NPK_XS_RING_BASE + 0x300 + 8 * 2, 0x7ff0);
        npk_csr_write(&d, NPK_XS_RING_BASE + 0x300 + 8 * 2 + 4, 3);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory, xscale_built: Path) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("faults")
    src = tmp / "faults.c"
    src.write_text(FAULTS_C)
    arm = build([src], tmp / "faults.elf")
    gpe = build([src], tmp / "faults.gpe", native=True)
    out = {"arm": arm, "gpe": gpe}
    for mode in ("segv", "spin"):                  # control daemons: the mode is in the name
        out[mode] = tmp / f"{mode}.elf"
        shutil.copy(arm, out[mode])
    return out


def xs_run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["xscale", "run", *args])
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit)
    return res.exit_code, res.output


# ---- a budget that runs out before the program ends ------------------------------------------


def test_xscale_run_fails_a_program_still_running_at_the_end_of_the_budget(faults: dict[str, Path]) -> None:
    code, out = xs_run(str(faults["arm"]), "spin", "--cycles", "200000", "--json")
    rep = json.loads(out)
    assert code == 1
    assert rep["stop"] == "budget" and rep["finished"] is False and rep["cycle"] == 200_000
    assert rep["status"]["state"] == "running" and rep["status"]["function"] == "main"
    code, out = xs_run(str(faults["arm"]), "spin", "--cycles", "200000")
    assert code == 1
    assert re.search(r"did not finish within 200000 cycles: running in main \(pc 0x[0-9a-f]+\)", out), out


def test_xscale_run_fails_a_program_blocked_for_ever_on_the_device(faults: dict[str, Path]) -> None:
    code, out = xs_run(str(faults["arm"]), "wait", "--cycles", "300000", "--json")
    rep = json.loads(out)
    assert code == 1 and rep["stop"] == "budget" and not rep["finished"]
    assert rep["status"]["state"] == "waiting" and "interrupt" in rep["status"]["waiting_on"]


def test_xscale_run_cycles_must_be_positive(faults: dict[str, Path]) -> None:
    for bad in ("0", "-5"):
        res = CliRunner().invoke(main, ["xscale", "run", str(faults["arm"]), "--cycles", bad])
        assert res.exit_code == 2 and "--cycles" in res.output, res.output


def test_a_program_that_ends_is_not_a_budget_stop(faults: dict[str, Path]) -> None:
    code, out = xs_run(str(faults["arm"]), "none", "--json")     # opens the device, exits 0
    rep = json.loads(out)
    assert code == 0 and rep["finished"] is True and rep["stop"] == "halted"
    assert rep["status"]["state"] == "exited" and rep["status"]["exit_code"] == 0


def test_npk_run_reports_a_still_running_program_without_failing(faults: dict[str, Path], me_image: Path) -> None:
    """Beside an ME image the budget is the MEs': a program still running at its end (a
    daemon) is reported as such, and is no failure of `npk run`."""
    res = CliRunner().invoke(main, ["run", str(me_image), "--xscale", str(faults["arm"]), "--xscale-arg", "spin",
                                    "--cycles", "200000", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["stop"] == "budget" and out["xscale"]["stop"] == "budget"
    assert out["xscale"]["finished"] is False and out["xscale"]["status"]["state"] == "running"
    res = CliRunner().invoke(main, ["run", str(me_image), "--xscale", str(faults["arm"]), "--xscale-arg", "spin",
                                    "--cycles", "200000"])  # fmt: skip
    assert res.exit_code == 0 and "did not finish within 200000 cycles: running in main" in res.output


# ---- a truncated ELF ---------------------------------------------------------------------------


@pytest.mark.parametrize(("keep", "what"), [(100, "program headers"), (-200, "section headers"),
                                            (40, "the ELF header")])  # fmt: skip
def test_truncated_elf_is_a_clean_error(tmp_path: Path, me_image: Path, keep: int, what: str) -> None:
    raw = DEMO_ELF.read_bytes()
    bad = tmp_path / "trunc.elf"
    bad.write_bytes(raw[:keep])
    with pytest.raises(ElfError, match=f"truncated ELF: {what} past the end of the file"):
        read_elf(bad)
    for args in (["xscale", "run", str(bad)], ["run", str(me_image), "--xscale", str(bad)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and f"{bad}: truncated ELF: {what} past the end" in res.output, res.output
        assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit)


def test_every_truncation_of_an_elf_is_an_elf_error(tmp_path: Path) -> None:
    raw = DEMO_ELF.read_bytes()
    bad = tmp_path / "cut.elf"
    for n in [*range(0, 400, 7), *range(400, len(raw), max(1, len(raw) // 60))]:
        bad.write_bytes(raw[:n])
        with pytest.raises(ElfError):
            read_elf(bad)


# ---- a device access the chip refuses ----------------------------------------------------------


def test_refused_queue_access_raises_a_device_fault_naming_the_window() -> None:
    chip = Chip("ixp2800")
    w = ChipWindows(chip)
    chip.write32("sram", 0x100, 0x3FFFFFF0)      # head outside SRAM
    chip.write32("sram", 0x108, 1)
    with pytest.raises(DeviceFault, match=r"SRAM queue window: read at 0xf0000100: read sram: out of range"):
        w.read(SRAM_QUEUE + 0x100)


@pytest.mark.parametrize(("mode", "window", "function"), [("qget", "SRAM queue window", "npk_queue_get"),
                                                          ("ringcfg", "scratch ring window", "npk_csr_write")])  # fmt: skip
def test_refused_device_access_is_a_bus_error_of_the_program(faults: dict[str, Path], mode: str, window: str,
                                                             function: str) -> None:  # fmt: skip
    code, out = xs_run(str(faults["arm"]), mode, "--json")
    rep = json.loads(out)
    st = rep["status"]
    assert code == 1 and st["state"] == "crashed" and st["exit_code"] == 128 + 7
    assert st["function"] == function
    assert st["fault"].startswith(f"bus error (SIGBUS): {window}: ")
    assert st["fault"].endswith(f" at pc {st['pc']:#x} ({function})")       # the faulting instruction
    code, out = xs_run(str(faults["arm"]), mode)
    assert code == 1 and "crashed (bus error (SIGBUS)" in out and "Exception ignored" not in out


def test_refused_device_access_from_a_gpe_process_is_a_bus_error(faults: dict[str, Path]) -> None:
    code, out = xs_run(str(faults["gpe"]), "qget", "--placement", "gpe", "--json")
    st = json.loads(out)["status"]
    assert code == 1 and st["state"] == "crashed" and st["exit_code"] == 128 + 7
    assert st["fault"].startswith("bus error (SIGBUS): SRAM queue window: read at 0xf0000100")


# ---- a gpe process that computes without reaching the device --------------------------------


def test_gpe_process_that_never_reaches_the_device_ends_at_the_configured_timeout(faults: dict[str, Path]) -> None:
    chip = Chip("ixp2800")
    chip.config.setdefault("xscale", {})["gpe_reply_timeout_s"] = 1
    with pytest.raises(XScaleError, match=r"sent no request for 1 s of host time .*gpe_reply_timeout_s"):
        co_run(chip, str(faults["gpe"]), ["spin"], 1000, placement="gpe", live=False)


# ---- the router's control daemon crashed or hangs ---------------------------------------------


def router_with_daemon(program: Path) -> dict[str, Any]:
    tr = traffic_of({"count": 6, "ports": {p: {"enabled": p == 0} for p in range(5)},
                     "defaults": {"size": 80, "load": 0.3, "mix": {"ttl_expiring": 1.0}}})  # fmt: skip
    rr = RouterRun.link("pipelined", {"control.program": str(program)}, tr)
    try:
        rr.run_traffic(100_000)
        rr.drain(500_000)
        s = rr.summary()
    finally:
        if rr.control is not None:
            rr.control.close()
    s["text"] = format_summary(s)
    return s


def test_crashed_control_daemon_is_reported_with_its_fault_and_pc(faults: dict[str, Path]) -> None:
    s = router_with_daemon(faults["segv"])
    why = [p for p in s["conservation"]["problems"] if "control daemon" in p]
    assert len(why) == 1, s["conservation"]
    assert re.fullmatch(r"the control daemon crashed \(exit code 139\): segmentation fault \(SIGSEGV\): .* at pc "
                        r"0x[0-9a-f]+ \(main\)", why[0]), why  # fmt: skip
    assert re.search(r"control plane: npkd on the xscale never started serving .*: crashed at pc 0x[0-9a-f]+ in main",
                     s["text"])  # fmt: skip


def test_hanging_control_daemon_is_reported_with_its_pc_and_unread_records(faults: dict[str, Path]) -> None:
    s = router_with_daemon(faults["spin"])
    cp = s["control_plane"]
    unread = cp["exception_records_unread"]
    assert unread > 0 and cp["xscale"]["state"] == "running" and not cp["running"]
    where = re.fullmatch(r"running at pc (0x[0-9a-f]+) in main", cp["process"])
    assert where, cp["process"]
    line = next(ln for ln in s["text"].splitlines() if ln.startswith("control plane:"))
    assert f"{cp['process']}, {unread} exception records unread" in line, line
    assert f"the control daemon is running at pc {where[1]} in main with {unread} exception records unread" \
        in s["in_flight"]["why"]
