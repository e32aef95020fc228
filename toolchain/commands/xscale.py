"""`npk xscale build|run` and the XScale side of `npk run IMAGE --xscale PROGRAM`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from npkit.xscale.core import XScaleError
from npkit.xscale.elf import ElfError
from npkit.xscale.gdb_address import GDB_ADDRESS, GDB_HELP
from npkit.xscale.system import PLACEMENTS, System
from npkit.xscale.toolchain import BuildError, build


def _echo_live(fd: int, data: bytes) -> None:
    stream = sys.stdout if fd == 1 else sys.stderr
    stream.buffer.write(data)
    stream.flush()


def co_run(chip: Any, program: str, argv: list[str], cycles: int, *, placement: str = "xscale",
           gdb_port: int | str | None = None, quantum: int | None = None, live: bool = True) -> dict[str, Any]:  # fmt: skip
    """Run `chip` (already loaded) and `program` together for up to `cycles` ME
    cycles, ending early once the program ended and no ME runs; return a report.

    "stop" is why the run ended: the chip's reason ("halted": no ME runs and the
    program ended; "breakpoint" ...), or "budget" when the cycles ran out first.
    "finished" says whether the program ended (exited or crashed) within the budget."""
    system = System(chip)
    host = system.attach_xscale(program, argv, placement=placement, quantum=quantum,
                                echo=_echo_live if live else None, gdb_port=gdb_port)  # fmt: skip
    reason = "budget"
    try:
        end = system.cycle + cycles
        while system.cycle < end:
            reason = system.run(min(1_000_000, end - system.cycle))
            done = host.state in ("exited", "crashed")
            if reason not in ("budget", "halted") or (done and (reason == "halted" or chip.cycle < system.cycle)):
                break
        finished = host.state in ("exited", "crashed")
        if reason == "halted" and not finished:
            reason = "budget"       # the MEs halted, but the run ended because the cycles ran out
        status = host.status()
        out, err = host.stdout, host.stderr
    finally:
        system.close()
    return {"stop": reason, "cycle": system.cycle, "budget": cycles, "finished": finished, "status": status,
            "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")}  # fmt: skip


def report_failed(rep: dict[str, Any], *, unfinished_fails: bool = False) -> bool:
    """A crash or a non-zero exit fails the run; so does a program still running or
    waiting when the budget ran out, with unfinished_fails (`npk xscale run`)."""
    st = rep["status"]
    if unfinished_fails and unfinished(rep):
        return True
    return st["state"] == "crashed" or (st["state"] == "exited" and st.get("exit_code") not in (0, None))


def unfinished(rep: dict[str, Any]) -> bool:
    """The program was still running or waiting when the cycle budget ran out."""
    return rep["stop"] == "budget" and rep["status"]["state"] in ("running", "waiting")


def format_status(rep: dict[str, Any]) -> str:
    st = rep["status"]
    where = f" in {st['function']} (pc {st['pc']:#x})" if "pc" in st else ""
    what = f", waiting on {st['waiting_on']}" if st.get("waiting_on") else ""
    code = f", exit code {st['exit_code']}" if st.get("exit_code") is not None else ""
    extra = f", {st['instructions']} instructions" if st.get("instructions") else ""
    fault = f" ({st['fault']})" if st.get("fault") else ""
    budget = f"did not finish within {rep['budget']} cycles: " if unfinished(rep) and "budget" in rep else ""
    return (f"xscale [{st['placement']}]: {budget}{st['state']}{fault}{code}{where}{what}{extra}, "
            f"{st.get('interrupts', 0)} interrupts")


@click.group("xscale")
def xscale_cmd() -> None:
    """The control processor: build and run Linux programs for the XScale."""


@xscale_cmd.command("build")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Executable to write.")
@click.option("--gpe", is_flag=True, help="Native build for the gpe placement (default: ARM for the XScale).")
def build_cmd(sources: tuple[str, ...], output: str, gpe: bool) -> None:
    """Compile C SOURCES (with xscale/lib/npk_xscale.c) into a static ARMv5TE executable."""
    from npkit.asm.base.writing import OutputError, check_writable
    from npkit.toolchain.commands.outputs import refuse_overwrite_usage

    refuse_overwrite_usage([("-o", output)], [(f"SOURCES ({s})", s) for s in sources])
    try:
        check_writable(output)
    except OutputError as e:
        raise click.ClickException(str(e)) from None
    try:
        out = build(list(sources), output, native=gpe)
    except BuildError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{out}: {'native (gpe)' if gpe else 'ARMv5TE static, clang + GNU ld'}")


@xscale_cmd.command("run")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1)
@click.option("--image", default=None, type=click.Path(exists=True, dir_okay=False), help="ME image to run beside it.")
@click.option("--config", default="ixp2800", show_default=True, help="Chip config name or YAML path.")
@click.option("--cycles", default=100_000_000, show_default=True, type=click.IntRange(min=1),
              help="ME-cycle budget: a program still running or waiting when it runs out fails the run.")
@click.option("--placement", type=click.Choice(PLACEMENTS), default="xscale", show_default=True)
@click.option("--gdb", "gdb_port", type=GDB_ADDRESS, default=None, metavar="unix:PATH|PORT",
              help="Wait for gdb: " + GDB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def run_cmd(program: str, args: tuple[str, ...], image: str | None, config: str, cycles: int, placement: str,
            gdb_port: int | str | None, as_json: bool) -> None:  # fmt: skip
    """Run PROGRAM on the XScale of an emulated chip (with an optional ME image).

    Exit 1 when the program crashed, exited with a non-zero status, or had not finished
    (still running, or waiting on the device or a timer) when the --cycles budget ran
    out: the status line then says "did not finish within N cycles" with its pc and
    function, and --json has "stop": "budget", "finished": false.

    With --placement gpe the program's native build runs as a host process: emulated
    time passes only when it reaches the device (a CSR access or a wait), so --cycles
    cannot bound a process that computes without reaching it; the emulator waits for
    its next request for at most the chip config's xscale.gpe_reply_timeout_s host
    seconds (60 by default), then kills it and fails."""
    from npkit.emulator.binding import Chip, EmulatorError
    from npkit.emulator.loader import LoadError, load_path

    try:
        chip = Chip(config)
        if image:
            load_path(chip, image)
        rep = co_run(chip, program, list(args), cycles, placement=placement, gdb_port=gdb_port, live=not as_json)
    except (EmulatorError, LoadError, XScaleError, ElfError, OSError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        click.echo(format_status(rep), err=True)
    if report_failed(rep, unfinished_fails=True):
        raise SystemExit(1)


def add_to_run_summary(summary: dict[str, Any], rep: dict[str, Any], as_json: bool) -> None:
    """`npk run --xscale`: put the XScale report in the summary (JSON) or print its status line."""
    summary["xscale"] = rep
    if not as_json:
        click.echo(format_status(rep))


def program_path(program: str) -> str:
    p = Path(program)
    if not p.exists():
        raise click.ClickException(f"XScale program {program} does not exist")
    return str(p)


def run_beside(chip: Any, program: str, args: tuple[str, ...], cycles: int, placement: str,
               gdb_port: int | str | None, as_json: bool) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """`npk run IMAGE --xscale PROGRAM`: co-run; errors become click errors."""
    try:
        rep = co_run(chip, program_path(program), list(args), cycles, placement=placement, gdb_port=gdb_port,
                     live=not as_json)  # fmt: skip
    except (XScaleError, ElfError, OSError) as e:
        raise click.ClickException(str(e)) from None
    return rep["stop"], rep
