"""The debugger: one Session over a Target, driven by command lines.

The interactive front end (prompt_toolkit) and batch mode (`--batch FILE`, or stdin when
it is not a terminal) both call `Session.execute(line)`, which returns the output text;
user errors raise DebugError.  Output depends only on the image, the config and the
commands, so batch transcripts are stable enough to assert on.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from npkit.asm.isa import DecodeError, decode, isa
from npkit.emulator.binding import (
    CTX_STATES,
    K_CAM_STATE,
    K_CAM_TAG,
    K_CSR,
    K_DIN,
    K_DOUT,
    K_LM,
    K_NN,
    K_PC,
    K_SIN,
    K_SOUT,
    K_STATE,
    K_WAIT,
    MEM_SPACES,
    PC_UNIT,
    UNITS,
    EmulatorError,
    HistEvent,
)
from npkit.emulator.me_names import MeNameError

from . import events, tcam_view, views
from . import packet as pkt
from .expr import ExprError, evaluate
from .profile import context_rows, format_context_rows
from .rewind import Recorder, RewindError, not_rewindable
from .source import _same_file, macro_frames, short, where
from .target import Target, TargetError

DEFAULT_RUN = 10_000_000
RUN_SLICE = 50_000
MAX_NEXT_STEPS = 100_000
MAX_WAKE_WAIT = 200_000
HISTORY_KEEP = 20_000
THREAD_HISTORY = 1024  # instructions `history` keeps a thread
MAX_DUMP = 1 << 16  # bytes `mem` prints at most
# most positional arguments a command takes (commands not listed parse their own)
MAX_ARGS = {"run": 1, "continue": 1, "next": 1, "info": 1, "tcam": 0, "thread": 1, "threads": 0, "regs": 1,
            "signals": 1, "rings": 0, "undisplay": 100, "history": 2, "back": 1, "reverse-step": 1, "list": 1, "where": 0, "stats": 0, "cycle": 0, "help": 1}  # fmt: skip


STOPPING = ("run", "continue", "step", "next", "back", "reverse-step")  # commands after which the displays are shown


def show_value(v: int) -> str:
    """An expression's value, decimal and hex of the same number (expressions are exact
    integers, not wrapped to a width); a negative one also as a 32-bit register holds it."""
    if v >= 0:
        return f"{v} (0x{v:x})"
    reg = f", 0x{v & 0xFFFFFFFF:08x} in 32 bits" if v >= -(1 << 31) else ""
    return f"{v} (-0x{-v:x}{reg})"


class DebugError(ValueError):
    """A command that cannot be carried out; the message says why."""


@dataclass
class Breakpoint:
    num: int
    spec: str
    ids: list[tuple[int, int]]  # (C breakpoint id, pc) per ME
    where: str
    cond: str = ""
    hits: int = 0
    places: list[str] = field(default_factory=list)  # one line per program it is in, when several
    at: list[tuple[int, int]] = field(default_factory=list)  # (me, pc) of each C breakpoint, as in ids


@dataclass
class Watchpoint:
    num: int
    spec: str
    cid: int
    me: int
    ctx: int
    reg: str = ""  # physical name when a register
    space: str = ""
    addr: int = 0
    length: int = 0
    last: bytes | int = 0
    hits: int = 0


@dataclass
class Session:
    target: Target
    out: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        t = self.target
        if not t.loaded:
            raise DebugError("nothing is loaded")
        self.chip = t.chip
        self.me = t.mes[0]
        self.ctx = t.ctxs(self.me)[0]
        self.breaks: dict[int, Breakpoint] = {}
        self.watches: dict[int, Watchpoint] = {}
        self.next_num = 1
        self.events: deque[HistEvent] = deque(maxlen=HISTORY_KEEP)
        self.sram_queues: set[int] = set()
        self.sram_rings: set[int] = set()
        self.chip.history_enable(2)  # every instruction too: `history` lists a thread's last ones
        self.log = Recorder(self.chip, t.mes)  # every call that changes the chip: `back` replays them
        self.instrs: dict[tuple[int, int], deque[tuple[int, int]]] = {}  # (me, ctx) -> (cycle, pc)
        self.faults_seen = 0  # the chip's fault total already reported
        self._stop_requested = False
        self._line = ""  # the command line being executed, for error columns
        self._rest_at = 0  # where its arguments start in it
        self.displays: dict[int, str] = {}  # display number -> expression
        self.next_display = 1
        self.commands: dict[str, tuple[Callable[[list[str], str], None], str]] = {
            "run": (self.cmd_run, "run [CYCLES]            run until a breakpoint, watchpoint or halt (or CYCLES)"),
            "continue": (self.cmd_run, "continue [CYCLES]       same as run"),
            "step": (self.cmd_step, "step [N] [ME[:CTX]]     execute N instructions of the thread"),
            "next": (self.cmd_next, "next [N]                step to the next source line at this macro depth"),
            "break": (self.cmd_break, "break FILE:LINE|LABEL|ADDR [me ME[,ME]] [if EXPR]  set a breakpoint "
                                      "(on every ME whose program has it, or those MEs)"),
            "watch": (self.cmd_watch, "watch REG | sram|dram|scratch ADDR [LEN] | tcam[N]  stop when it is written"),
            "delete": (self.cmd_delete, "delete [N]              delete breakpoint/watchpoint N (all without N)"),
            "info": (self.cmd_info, "info [tcam]             list breakpoints and watchpoints (tcam: the TCAM's entries)"),
            "tcam": (self.cmd_tcam, "tcam                    the TCAM's counters and valid entries (print tcam[N]: one)"),
            "thread": (self.cmd_thread, "thread ME:CTX           make ME:CTX the current thread (ME 0x10 or 8; 1:0:3 = cluster:ME:CTX)"),
            "threads": (self.cmd_threads, "threads                 every context of every loaded ME"),
            "regs": (self.cmd_regs, "regs [ME:CTX]           registers by .reg name and physical name, xfers, NN, LM, CSRs, CAM"),
            "set": (self.cmd_set, "set REG|pc|MEM[ADDR[, WIDTH]] = EXPR  change a register of this thread or memory (MEM: sram, dram, scratch; WIDTH 1, 2, 4 or 8 bytes)"),
            "display": (self.cmd_display, "display [EXPR]          show EXPR (in the current thread) at every stop; alone: show them now"),
            "undisplay": (self.cmd_undisplay, "undisplay [N]           stop showing display N (all without N)"),
            "history": (self.cmd_history, "history [ME[:CTX]] [N]  the thread's last N instructions (default 10) with their cycles"),
            "back": (self.cmd_back, "back [N]                go back N instructions of this thread (default 1): the state "
                                    "just before it executed the Nth last one"),
            "reverse-step": (self.cmd_back, "reverse-step [N]        same as back"),
            "print": (self.cmd_print, "print EXPR | tcam[N]    value of an expression over registers; a TCAM entry"),
            "signals": (self.cmd_signals, "signals [ME]            signals raised and awaited per context"),
            "mem": (self.cmd_mem, "mem sram|dram|scratch ADDR [LEN]  dump memory"),
            "rings": (self.cmd_rings, "rings                   scratch rings: base, size, count; SRAM rings seen"),
            "queues": (self.cmd_queues, "queues [ADDR...]        SRAM queue descriptors (seen in use, or at ADDR)"),
            "packet": (self.cmd_packet, "packet [EXPR] [pad N] [len N]  decode the packet buffer at DRAM address EXPR"),
            "list": (self.cmd_list, "list [FILE:LINE|LABEL]  source around the PC (=> marks the current line)"),
            "where": (self.cmd_where, "where                   current thread's location with its macro chain"),
            "stats": (self.cmd_stats, "stats                   ME and unit statistics"),
            "cycle": (self.cmd_cycle, "cycle                   current cycle and emulated time"),
            "help": (self.cmd_help, "help [COMMAND]          this list"),
        }  # fmt: skip
        self.aliases = {"c": "continue", "s": "step", "n": "next", "b": "break", "r": "run",
                        "p": "print", "l": "list", "bt": "where", "i": "info", "x": "mem", "d": "delete",
                        "rs": "reverse-step"}  # fmt: skip

    # ------------------------------------------------------------------ plumbing
    def emit(self, text: str = "") -> None:
        self.out.append(text)

    def request_stop(self) -> None:
        """Ask a running command (run, step, next) to stop at its next check; the chip is
        left between two cycles, so everything can be inspected and `run` goes on."""
        self._stop_requested = True

    @contextlib.contextmanager
    def sigint_stops(self) -> Iterator[None]:
        """While active, Ctrl-C (SIGINT) stops the running command instead of raising
        KeyboardInterrupt (the interactive front end runs every command inside it)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = signal.signal(signal.SIGINT, lambda _sig, _frame: self.request_stop())
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)

    def column(self, text: str, start: int = 0) -> int:
        """1-based column of `text` in the command line, searched from `start` characters
        into its arguments (0 when it is not there)."""
        i = self._line.find(text, self._rest_at + start) if text else -1
        return i + 1 if i >= 0 else 0

    def _usage(self, name: str) -> str:
        return re.split(r"\s{2,}", self.commands[name][1])[0]

    @staticmethod
    def arg_offset(rest: str, args: list[str], i: int) -> int:
        """Where argument i starts in `rest` (args as shlex split them)."""
        starts = [m.start() for m in re.finditer(r"\S+", rest)]
        return starts[i] if len(starts) == len(args) else sum(len(a) for a in args[:i])

    def unexpected(self, name: str, token: str, start: int = 0) -> DebugError:
        col = self.column(token, start)
        at = f"column {col}: " if col else ""
        return DebugError(f"{at}unexpected '{token}' (usage: {self._usage(name)})")

    def command_name(self, word: str) -> str | None:
        """The command `word` names: itself, an alias or a unique prefix."""
        name = self.aliases.get(word, word)
        if name in self.commands:
            return name
        cands = [c for c in self.commands if c.startswith(name)]
        return cands[0] if len(cands) == 1 else None

    def execute(self, line: str) -> str:
        """Run one command line; returns its output (raises DebugError)."""
        self.out = []
        self._stop_requested = False
        text = line.strip()
        if not text or text.startswith("#"):
            return ""
        word, _, rest = text.partition(" ")
        self._line = text
        self._rest_at = len(word) + 1 + (len(rest) - len(rest.lstrip()))
        rest = rest.strip()
        name = self.command_name(word)
        if name is None:
            raise DebugError(f"unknown command '{word}' (try help)")
        try:
            args = shlex.split(rest)
        except ValueError as e:
            raise DebugError(str(e)) from None
        limit = MAX_ARGS.get(name)
        if limit is not None and len(args) > limit:
            raise self.unexpected(name, args[limit], self.arg_offset(rest, args, limit))
        try:
            self.commands[name][0](args, rest)
        except EmulatorError as e:
            raise DebugError(str(e)) from None
        except ExprError as e:
            raise DebugError(str(e)) from None
        except DebugError:
            raise
        except (ValueError, KeyError, IndexError, ArithmeticError) as e:  # a malformed argument
            raise DebugError(f"{name}: {e}; try `help {name}`") from None
        finally:
            self._drain()
        if name in STOPPING and self.displays:
            self._show_displays()
        self._report_faults()
        return "\n".join(self.out)

    def _report_faults(self) -> None:
        """Say so when the chip faulted since the last report (npk run's warnings): how many
        of each kind, and where the first and the last of them were.  A fault does not stop
        the chip, so neither does it stop `run`."""
        f = self.chip.faults()
        new = f["total"] - self.faults_seen
        if new <= 0:
            return
        self.faults_seen = f["total"]
        log = f["last"][-new:]
        self.emit(f"warning: the chip faulted {new} time{'s' if new > 1 else ''} (it goes on after a fault; "
                  f"total {f['total']}: {', '.join(f'{k} {n}' for k, n in f['counts'].items())})")  # fmt: skip
        shown = [log[0]] if len(log) == 1 else [log[0], log[-1]]
        first = "first" if len(log) == new else f"earliest of the last {len(log)} kept"
        for which, x in zip((first, "last") if len(shown) > 1 else ("",), shown, strict=True):
            who = (f"ME {self.nm(x['me'])} ctx {x['ctx']} pc {x['pc']} at {self.loc(x['me'], x['pc'])}"
                   if x["me"] in self.target.loaded else "an API call")  # fmt: skip
            lead = f"{which}: " if which else ""
            self.emit(f"  {lead}{x['kind']} by {who}, address 0x{x['address']:x}, cycle {x['cycle']}")

    def _drain(self) -> None:
        for ev in self.chip.history():
            if ev.kind == "instr":
                key = (ev.me, ev.ctx)
                if key not in self.instrs:
                    self.instrs[key] = deque(maxlen=THREAD_HISTORY)
                self.instrs[key].append((ev.cycle, ev.a0))
                continue
            self.events.append(ev)
            if ev.kind == "mem_done" and events.unit_name(ev) == "sram":  # completion: the descriptor address
                if events.names_descriptor(ev, "queue"):
                    self.sram_queues.add(ev.a1 & ~3)
                elif events.names_descriptor(ev, "ring"):
                    self.sram_rings.add(ev.a1 & ~3)

    def nm(self, me: int) -> str:
        """An ME (flat index) as printed: its hardware number, 0x10."""
        return self.chip.me_name(me)

    def names(self, mes: list[int]) -> str:
        return ", ".join(self.nm(me) for me in mes)

    def _me(self, spec: str) -> int:
        """An ME named 0x10, 1:0 (cluster:ME) or 8 (flat index), loaded with a program."""
        try:
            me = self.chip.me_index(spec)
        except MeNameError as e:
            raise DebugError(str(e)) from None
        if me not in self.target.loaded:
            raise DebugError(f"ME {self.nm(me)} has nothing loaded (loaded: {self.names(self.target.mes)})")
        return me

    def _thread(self, spec: str) -> tuple[int, int]:
        """ME or ME:CTX, ME being 0x10 or a flat index 8; cluster:ME:CTX (1:0:3) also."""
        parts = spec.split(":")
        if not 1 <= len(parts) <= 3 or not all(parts) or (len(parts) > 1 and not parts[-1].isdigit()):
            raise DebugError(f"expected ME or ME:CTX (0x10:3, 8:3, or cluster:ME:CTX 1:0:3), got '{spec}'")
        me = self._me(":".join(parts[:2]) if len(parts) == 3 else parts[0])
        ctx = int(parts[-1]) if len(parts) > 1 else (self.ctx if me == self.me else self.target.ctxs(me)[0])
        if ctx not in self.target.ctxs(me):
            raise DebugError(f"ME {self.nm(me)} has no context {ctx}")
        return me, ctx

    def pc(self, me: int | None = None, ctx: int | None = None) -> int:
        return self.chip.reg(self.me if me is None else me, "pc", self.ctx if ctx is None else ctx)

    def loc(self, me: int, pc: int) -> str:
        if pc >= len(self.target.program(me).words):
            return f"(past the end of {self.target.loaded[me]})"
        sm = self.target.smap(me)
        lab = sm.label_at.get(pc)
        return where(sm.entry(pc)) + (f" <{lab}>" if lab else "")

    def instr_text(self, me: int, pc: int) -> str:
        prog = self.target.program(me)
        if not 0 <= pc < len(prog.words):
            return "(outside the program)"
        labels = self.target.smap(me).label_at
        try:
            return decode(prog.words[pc], prog.ctx_mode, label_of=lambda a: f"{labels[a]}#" if a in labels else None)
        except DecodeError:
            return f".word 0x{prog.words[pc]:010x}"

    def show_here(self, me: int | None = None, ctx: int | None = None) -> None:
        me = self.me if me is None else me
        ctx = self.ctx if ctx is None else ctx
        pc = self.pc(me, ctx)
        state = self.chip.ctx_state(me, ctx)
        self.emit(f"ME {self.nm(me)} ctx {ctx} pc {pc} ({state}) at {self.loc(me, pc)}")
        self.show_code(me, pc)

    def show_code(self, me: int, pc: int) -> None:
        """The source line of address pc and its instruction."""
        sm = self.target.smap(me)
        e = sm.entry(pc)
        if e is not None and sm.text(e.file) is None:
            self.emit(f"  {e.line:>5}  (source not found: npk debug --source-dir DIR)")
        elif e is not None:
            src = sm.source_line(e.file, e.line).strip()
            self.emit(f"  {e.line:>5}  {src}" if src else f"  {self.instr_text(me, pc)}")
        self.emit(f"         {self.instr_text(me, pc)}")

    # ------------------------------------------------------------------ names and values
    def reg_phys(self, name: str, me: int | None = None) -> str | None:
        """The physical register a `.reg` name (optionally NAME.in / NAME.out) stands for on
        ME (a transfer register with the half the code uses); None when it is no .reg name."""
        sm = self.target.smap(self.me if me is None else me)
        base, _, half = name.partition(".")
        cands = sm.reg_candidates(base)
        phys = {c.phys for c in cands}
        if len(phys) > 1:
            raise DebugError(f"'{base}' names {len(phys)} registers in different scopes: "
                             + ", ".join(f"{c.phys} (scope {c.scope or 'global'})" for c in cands))  # fmt: skip
        if not phys:
            return None
        if not half and cands[0].kind == "xfer":
            half = sm.xfer_half(base)
        return phys.pop() + (f".{half}" if half else "")

    def reg_value(self, name: str, me: int | None = None, ctx: int | None = None) -> int:
        me = self.me if me is None else me
        ctx = self.ctx if ctx is None else ctx
        sm = self.target.smap(me)
        reg = self.reg_phys(name, me)
        if reg is not None:
            return self.chip.reg(me, reg, ctx)
        if name in sm.labels:
            return sm.labels[name]
        if name in sm.signals:
            return sm.signals[name]
        if name in sm.mems:
            return int(sm.mems[name].value)
        if name == "packet":  # not a name of the program: the traffic id of the thread's packet
            return self.packet_id(me, ctx)
        try:
            return self.chip.reg(me, name, ctx)
        except EmulatorError as e:
            if "out of range" in str(e):  # a register name, its number past the range
                raise DebugError(str(e)) from None
            raise DebugError(f"unknown name '{name}' (not a .reg, register, label, signal or memory symbol)") from None

    def eval(self, text: str, me: int | None = None, ctx: int | None = None) -> int:
        try:
            return evaluate(text, lambda n: self.reg_value(n, me, ctx))
        except ExprError as e:
            at = self.column(text.strip())
            if e.col < 0 or not at:
                raise
            raise ExprError(f"column {at + e.col - (len(text) - len(text.lstrip()))}: {e}", e.col) from None

    def sig_name(self, me: int, n: int) -> str:
        names = [k for k, v in self.target.smap(me).signals.items() if v == n]
        return f"{'/'.join(names)}(s{n})" if names else f"s{n}"

    def sig_list(self, me: int, mask: int) -> str:
        return " ".join(self.sig_name(me, n) for n in range(16) if mask >> n & 1) or "-"

    # ------------------------------------------------------------------ running
    def _report_stop(self, reason: str, start: int) -> None:
        st = self.chip.last_stop()
        cyc = self.chip.cycle
        if reason == "breakpoint":
            bp = self._bp_of(st["id"])
            if st["me"] >= 0:
                self.me, self.ctx = st["me"], st["ctx"]
            self.emit(f"breakpoint {bp.num if bp else '?'} ({bp.spec if bp else ''}) hit at cycle {cyc}")
            self.show_here()
        elif reason == "watchpoint":
            self._report_watches(st)
        elif reason == "interrupted":
            self.emit(f"interrupted at cycle {cyc} (`run` goes on from here)")
            self.show_here()
        elif reason == "halted":
            self.emit(f"all MEs halted at cycle {cyc}")
            for me in self.target.mes:
                s = self.chip.me_status(me)
                if s["state"] != "running":
                    self.emit(f"  ME {self.nm(me)}: {s['state']} at {self.loc(me, s['pc'])}"
                              + (f" ({s['reason']})" if s["reason"] else ""))  # fmt: skip
        else:
            self.emit(f"ran {cyc - start} cycles, now at cycle {cyc}")

    def _bp_of(self, cid: int) -> Breakpoint | None:
        return next((b for b in self.breaks.values() if any(i == cid for i, _ in b.ids)), None)

    def _watch_value(self, w: Watchpoint) -> bytes | int:
        return self.chip.reg(w.me, w.reg, w.ctx) if w.reg else self.chip.mem_read(w.space, w.addr, w.length)

    def _watch_changes(self, first: int = -1) -> list[Watchpoint]:
        """Watchpoints whose value differs from the one last reported (the one with C id
        `first` ahead): a write of the same value is not a change and stops nothing."""
        ws = sorted(self.watches.values(), key=lambda w: (w.cid != first, w.num))
        return [w for w in ws if self._watch_value(w) != w.last]

    def _report_watches(self, st: dict[str, int]) -> None:
        changed = self._watch_changes(st["id"])
        shown_writer = False
        for w in changed:
            w.hits += 1
            new = self._watch_value(w)
            if isinstance(new, int):
                self.emit(f"watchpoint {w.num} ({w.spec}): 0x{int(w.last):x} -> 0x{new:x} at cycle {self.chip.cycle}")
                w.last = new
                if w.cid == st["id"]:
                    shown_writer = self._report_reg_writer(st)
                continue
            self.emit(f"watchpoint {w.num} ({w.spec}) written at cycle {self.chip.cycle}")
            old_b = w.last if isinstance(w.last, bytes) else b""
            for i in range(0, w.length, 4):
                o, n = old_b[i : i + 4], new[i : i + 4]
                if o != n:
                    self.emit(f"  {w.space} 0x{w.addr + i:x}: {o.hex() or '?'} -> {n.hex()}")
            w.last = new
            writer = self._writer(w.space, w.addr, w.length)
            if writer is not None:
                self.me, self.ctx = writer.me, writer.ctx
                self.emit(f"  written by ME {self.nm(writer.me)} ctx {writer.ctx} (command issued at cycle {writer.cycle})")
        if not shown_writer:
            self.show_here()
            return
        pc = self.pc()
        self.emit(f"ME {self.nm(self.me)} ctx {self.ctx} goes on at pc {pc} ({self.chip.ctx_state(self.me, self.ctx)}): {self.loc(self.me, pc)}")

    def _report_reg_writer(self, st: dict[str, int]) -> bool:
        """The thread and the instruction that wrote the register (from the stop); False
        when the stop does not name one."""
        me, ctx, pc = st["me"], st["ctx"], st["pc"]
        if me not in self.target.loaded or ctx < 0:
            return False
        self.me, self.ctx = me, ctx
        if pc == PC_UNIT:
            self._drain()
            issue = next((e for e in reversed(self.events) if e.kind == "mem_issue" and e.me == me
                          and e.ctx == ctx), None)  # fmt: skip
            unit = UNITS[issue.unit] if issue is not None and 0 <= issue.unit < len(UNITS) else "memory"
            when = f" (command issued at cycle {issue.cycle})" if issue is not None else ""
            self.emit(f"  written by the {unit} unit: a read of ME {self.nm(me)} ctx {ctx} completed{when}")
            return False
        self.emit(f"  written by ME {self.nm(me)} ctx {ctx} pc {pc} at {self.loc(me, pc)}")
        self.show_code(me, pc)
        return True

    def _writer(self, space: str, addr: int, length: int) -> HistEvent | None:
        """The thread whose write to [addr, addr+length) completed last (from history)."""
        unit = UNITS.index(space)
        self._drain()
        done = next((e for e in reversed(self.events) if e.kind == "mem_done" and e.unit == unit
                     and addr - 256 < e.a1 < addr + length), None)  # fmt: skip
        if done is None:
            return None
        issue = next((e for e in reversed(self.events) if e.kind == "mem_issue" and e.me == done.me
                      and e.ctx == done.ctx and e.a1 == done.a1 and e.cycle <= done.cycle), None)  # fmt: skip
        return issue or done

    def run(self, cycles: int) -> str:
        """Run up to `cycles` cycles, in slices so that Ctrl-C (request_stop) stops a long run."""
        start = self.chip.cycle
        reason = self._run_until(start + cycles)
        self._report_stop(reason, start)
        return reason

    def _run_until(self, end: int) -> str:
        while True:
            if self._stop_requested:
                return "interrupted"
            reason = self.log.run(min(RUN_SLICE, max(0, end - self.chip.cycle)))
            if reason == "budget" and self.chip.cycle < end:
                self._drain()
                continue
            st = self.chip.last_stop()
            if reason == "breakpoint":
                if not self._hit(st):
                    if self.chip.cycle >= end:
                        return "budget"
                    continue
            elif reason == "watchpoint" and not self._watch_changes():
                if self.chip.cycle >= end:  # a memory write of the same bytes: go on
                    return "budget"
                continue
            return str(reason)

    def _hit(self, st: dict[str, int]) -> bool:
        """A breakpoint stop (`st`: last_stop()) that counts: its condition (if any) holds;
        the breakpoint's hits go up.  False: a conditional breakpoint whose condition fails."""
        bp = self._bp_of(st["id"])
        if bp is None:
            return True
        if bp.cond and not self.eval(bp.cond, st["me"], st["ctx"]):
            return False
        bp.hits += 1
        return True

    def cmd_run(self, args: list[str], rest: str) -> None:
        cycles = self._count(args[0], "CYCLES") if args else DEFAULT_RUN
        self.run(cycles)

    def _int(self, text: str) -> int:
        try:
            return int(text, 0)
        except ValueError:
            return self.eval(text)

    def _count(self, text: str, what: str) -> int:
        n = self._int(text)
        if n < 1:
            raise DebugError(f"column {self.column(text)}: {what} must be 1 or more, got {n}")
        return n

    # ------------------------------------------------------------------ memory addresses
    def mem_limits(self, space: str) -> str:
        cfg = self.chip.config
        if space == "sram":
            n, size = int(cfg["units"]["sram"]["channels"]), int(cfg["sram_channel_bytes"])
            return f"sram is {n} channels of 0x{size:x} bytes at " + ", ".join(f"0x{c << 30:x}" for c in range(n))
        return f"{space} is 0x0..0x{int(cfg[f'{space}_bytes']) - 1:x}"

    def mem_ok(self, space: str, addr: int, length: int) -> bool:
        cfg = self.chip.config
        if addr < 0 or length < 0:
            return False
        if space == "sram":
            ch, off = addr >> 30, addr & 0x3FFFFFFF
            return ch < int(cfg["units"]["sram"]["channels"]) and off + length <= int(cfg["sram_channel_bytes"])
        return addr + length <= int(cfg[f"{space}_bytes"])

    def address(self, space: str, text: str, length: int = 1) -> int:
        """The value of `text` as a `space` address with `length` bytes there, or an error
        that says where the space is."""
        addr = self._int(text)
        if not self.mem_ok(space, addr, max(length, 1)):
            shown = f"{'-' if addr < 0 else ''}0x{abs(addr):x}" if abs(addr) < 1 << 64 else f"a {addr.bit_length()}-bit number"
            span = f" (+{length} bytes)" if length > 1 and 0 <= addr < 1 << 64 else ""
            col = self.column(text)
            raise DebugError(f"{f'column {col}: ' if col else ''}{space} address {shown}{span} is out of range; "
                             f"{self.mem_limits(space)}")  # fmt: skip
        return addr

    def _length(self, text: str, most: int) -> int:
        n = self._int(text)
        if not 1 <= n <= most:
            raise DebugError(f"column {self.column(text)}: LEN must be 1..{most}, got {n}")
        return n

    def _ended(self, me: int) -> str:
        st = self.chip.me_status(me)
        if st["state"] == "running":
            return "the context is inactive (ctx_arb[kill] or never enabled)"
        return f"ME {self.nm(me)} {st['state']} at {self.loc(me, st['pc'])}" + (f": {st['reason']}" if st["reason"] else "")

    def step_once(self, me: int, ctx: int) -> str:
        """Step ME:CTX one instruction; returns 'step' or why something else stopped it."""
        if self.chip.ctx_state(me, ctx) == "inactive":
            raise DebugError(f"ME {self.nm(me)} ctx {ctx} is not running ({self._ended(me)})")
        # a sleeping context: advance the chip a cycle at a time until it wakes, so a thread
        # that never wakes (the bug being hunted) cannot hang the debugger
        start = self.chip.cycle
        while self.chip.ctx_state(me, ctx) == "sleep":
            if self._stop_requested:
                return "interrupted"
            if self.chip.cycle - start >= MAX_WAKE_WAIT:
                wait = self.sig_list(me, self.chip.reg(me, "wait", ctx))
                raise DebugError(f"ME {self.nm(me)} ctx {ctx} is still asleep after {MAX_WAKE_WAIT} cycles "
                                 f"(waiting on {wait}); `run` to go on, `threads` to see who could signal it")  # fmt: skip
            reason = self.log.run(1)
            if reason == "watchpoint" and not self._watch_changes():
                continue
            if reason == "breakpoint" and not self._hit(self.chip.last_stop()):
                continue
            if reason not in ("budget",):
                return reason
        pc0 = self.pc(me, ctx)
        for _ in range(8):
            self.log.step(me, ctx)
            st = self.chip.last_stop()
            if st["reason"] == "breakpoint" and st["me"] == me and st["ctx"] == ctx:
                continue  # stopped before its own instruction: step over the breakpoint
            if st["reason"] == "breakpoint" and not self._hit(st):  # a condition that fails: no stop
                if self.pc(me, ctx) != pc0:
                    return "step"
                continue
            if st["reason"] == "watchpoint" and not self._watch_changes():
                if self.pc(me, ctx) != pc0:  # a memory write of the same bytes: not a stop
                    return "step"
                continue
            return str(st["reason"])
        return "step"

    def cmd_step(self, args: list[str], rest: str) -> None:
        n = 1
        if len(args) > 2:
            raise DebugError("step [N] [ME[:CTX]]")
        for i, a in enumerate(args):
            if ":" in a or (i == 1 and len(args) == 2):
                self.me, self.ctx = self._thread(a)
            else:
                n = self._count(a, "N")
        start = self.chip.cycle
        for _ in range(n):
            why = "interrupted" if self._stop_requested else self.step_once(self.me, self.ctx)
            if why != "step":
                self._report_stop(why, start)
                return
        self.show_here()

    def cmd_next(self, args: list[str], rest: str) -> None:
        count = self._count(args[0], "N") if args else 1
        start = self.chip.cycle
        sm = self.target.smap(self.me)
        for _ in range(count):
            pc0 = self.pc()
            e0 = sm.entry(pc0)
            d0 = sm.depth(pc0)
            key0 = (e0.file, e0.line) if e0 else None
            for _ in range(MAX_NEXT_STEPS):
                why = "interrupted" if self._stop_requested else self.step_once(self.me, self.ctx)
                if why != "step":
                    self._report_stop(why, start)
                    return
                if self.chip.ctx_state(self.me, self.ctx) == "inactive":
                    self.emit(f"ME {self.nm(self.me)} ctx {self.ctx} ended: {self._ended(self.me)}")
                    return
                pc = self.pc()
                e = sm.entry(pc)
                if e is None or (sm.depth(pc) <= d0 and (e.file, e.line) != key0):
                    break
            else:
                self.emit(f"next: still on the same line after {MAX_NEXT_STEPS} instructions")
        self.show_here()

    # ------------------------------------------------------------------ breakpoints
    def resolve_location(self, spec: str, mes: list[int] | None = None) -> list[tuple[int, int]]:
        """(me, pc) pairs for FILE:LINE, LABEL or ADDR on every loaded ME it applies to
        (of `mes`, when given): each ME is looked up in its own program's source map, so
        with several images a line or label breaks on every ME whose program has it."""
        out: list[tuple[int, int]] = []
        errors: list[str] = []
        for me in self.target.mes if mes is None else mes:
            sm = self.target.smap(me)
            m = re.fullmatch(r"(.+):(\d+)", spec)
            if m:
                try:
                    addrs, _, _ = sm.addrs_for_line(m[1], int(m[2]))
                except KeyError as e:
                    errors.append(str(e.args[0]))
                    continue
                out += [(me, a) for a in addrs]
            elif spec.rstrip("#") in sm.labels:
                out.append((me, sm.labels[spec.rstrip("#")]))
            elif re.fullmatch(r"0x[0-9a-fA-F]+|\d+", spec):  # an address: on every ME whose program has it
                a = int(spec, 0)
                if a >= len(self.target.program(me).words):
                    errors.append(f"address {a} is past the end of program {self.target.loaded[me]}")
                    continue
                out.append((me, a))
            else:
                errors.append(f"'{spec}' is not FILE:LINE, a label or an address")
        if not out:
            errors.sort(key=lambda e: e.startswith("no code from a file named"))  # a file that exists first
            raise DebugError(errors[0] if errors else f"no code at {spec}")
        return out

    def _check_condition(self, cond: str, mes: list[int]) -> None:
        """Evaluate a breakpoint's condition on each ME it is set on, as a hit there will:
        its names are those of that ME's program, not of the current thread's."""
        for me in mes:
            try:
                self.eval(cond, me, self.target.ctxs(me)[0])
            except DebugError as e:
                where = f" on ME {self.nm(me)} ({self.target.loaded[me]})" if len(mes) > 1 or me != self.me else ""
                raise DebugError(f"if {cond}: {e}{where}") from None

    def _break_mes(self, words: list[str], spec_len: int) -> list[int] | None:
        """The MEs of `break LOC me ME[,ME...]` (None: every ME); `words` follow LOC."""
        if not words:
            return None
        if words[0] != "me" or len(words) != 2:
            col = self.column(words[0], spec_len)
            raise DebugError(f"column {col}: unexpected '{words[0]}'; a location is one word "
                             "(FILE:LINE, LABEL or ADDR), `me ME[,ME]` may follow, a condition follows `if`")  # fmt: skip
        mes = [self._me(m) for m in words[1].split(",")]
        return sorted(set(mes))

    def _break_places(self, places: list[tuple[int, int]]) -> list[tuple[list[int], str, list[int]]]:
        """The places of a breakpoint grouped by what they are: (MEs, location, addresses)
        for each program (or image) it landed in, in ME order."""
        groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for me in sorted({me for me, _ in places}):
            addrs = tuple(sorted({pc for m, pc in places if m == me}))
            groups.setdefault((self.loc(me, addrs[0]), addrs), []).append(me)
        return [(mes, where, list(addrs)) for (where, addrs), mes in groups.items()]

    def cmd_break(self, args: list[str], rest: str) -> None:
        if not args:
            raise DebugError(self._usage("break"))
        spec, _, cond = rest.partition(" if ")
        spec = spec.strip()
        if not spec or spec == "if" or spec.startswith("if "):
            raise DebugError(f"break needs a location before `if` (usage: {self._usage('break')})")
        words = spec.split()
        only = self._break_mes(words[1:], len(words[0]))
        spec = words[0]
        places = self.resolve_location(spec, only)
        if cond.strip():  # unknown names are an error now, not at the first hit
            self._check_condition(cond.strip(), sorted({me for me, _ in places}))
        ids = [(self.log.add_breakpoint(pc, me=me), pc) for me, pc in places]
        groups = self._break_places(places)
        shown = spec if only is None else f"{spec} me {','.join(self.nm(me) for me in only)}"
        bp = Breakpoint(self.next_num, shown, ids, groups[0][1], cond.strip(), at=list(places))
        if len(groups) > 1:  # several programs: each place on a line of its own (and in `info`)
            bp.where = f"{len(groups)} places"
            bp.places = [f"ME {self.names(mes)}: {where}, address {', '.join(map(str, addrs))}"
                         for mes, where, addrs in groups]  # fmt: skip
        self.breaks[bp.num] = bp
        self.next_num += 1
        if_cond = f" if {bp.cond}" if bp.cond else ""
        if len(groups) == 1:
            mes, where, addrs = groups[0]
            self.emit(f"breakpoint {bp.num} at {where}, address {', '.join(map(str, addrs))}"
                      f" on ME {self.names(mes)}{if_cond}")  # fmt: skip
            return
        self.emit(f"breakpoint {bp.num} at {spec} in {len(groups)} places{if_cond}:")
        for line in bp.places:
            self.emit(f"  {line}")

    def cmd_watch(self, args: list[str], rest: str) -> None:
        if not args:
            raise DebugError(self._usage("watch"))
        num = self.next_num
        entry = tcam_view.ENTRY_RE.match(rest)
        if entry:
            n = self.eval(entry["n"])
            try:
                addr, length = tcam_view.entry_span(self.chip, n)
            except tcam_view.TcamViewError as e:
                raise DebugError(str(e)) from None
            cid = self.log.add_watchpoint(f"sram:{addr}", length=length)
            w = Watchpoint(num, f"tcam[{n}] (sram 0x{addr:x} len {length})", cid, -1, -1, space="sram", addr=addr,
                           length=length, last=self.chip.mem_read("sram", addr, length))  # fmt: skip
        elif args[0] in MEM_SPACES:
            if len(args) < 2:
                raise DebugError(f"watch {args[0]} ADDR [LEN]")
            if len(args) > 3:
                raise self.unexpected("watch", args[3], self.arg_offset(rest, args, 3))
            length = self._length(args[2], MAX_DUMP) if len(args) > 2 else 4
            addr = self.address(args[0], args[1], length)
            cid = self.log.add_watchpoint(f"{args[0]}:{addr}", length=length)
            w = Watchpoint(num, f"{args[0]} 0x{addr:x} len {length}", cid, -1, -1, space=args[0], addr=addr,
                           length=length, last=self.chip.mem_read(args[0], addr, length))  # fmt: skip
        else:
            if len(args) > 1:
                raise self.unexpected("watch", args[1], self.arg_offset(rest, args, 1))
            name = args[0]
            phys = self.reg_phys(name) or name
            try:
                ref = self.chip.reg_ref(self.me, phys, self.ctx)
            except EmulatorError as e:
                raise DebugError(f"{e} (watch takes a .reg name, a register or sram|dram|scratch ADDR [LEN])") from None
            if ref.kind > K_LM:
                raise DebugError(f"'{name}' cannot be watched: watchpoints see GPRs, transfer, next-neighbour "
                                 "and local-memory registers (and memory)")  # fmt: skip
            cid = self.log.add_watchpoint(phys, me=self.me, ctx=self.ctx)
            label = f"{name} ({phys}) ME {self.nm(self.me)} ctx {self.ctx}" if phys != name else f"{name} ME {self.nm(self.me)} ctx {self.ctx}"
            w = Watchpoint(num, label, cid, self.me, self.ctx, reg=phys, last=self.chip.reg(self.me, phys, self.ctx))
        self.watches[num] = w
        self.next_num += 1
        self.emit(f"watchpoint {num}: {w.spec}")

    def cmd_delete(self, args: list[str], rest: str) -> None:
        for i, a in enumerate(args):
            if not a.isdigit():
                raise DebugError(f"column {self.column(a, self.arg_offset(rest, args, i))}: '{a}' is not a "
                                 "breakpoint or watchpoint number (see info)")  # fmt: skip
        nums = [int(a) for a in args] if args else sorted([*self.breaks, *self.watches])
        for n in nums:
            if n in self.breaks:
                for cid, _ in self.breaks.pop(n).ids:
                    self.log.del_breakpoint(cid)
            elif n in self.watches:
                self.log.del_watchpoint(self.watches.pop(n).cid)
            else:
                raise DebugError(f"no breakpoint or watchpoint {n}")
        self.emit(f"deleted {', '.join(map(str, nums))}" if nums else "nothing to delete")

    def cmd_tcam(self, args: list[str], rest: str) -> None:
        try:
            for line in tcam_view.listing(self.chip, self.target.image.meta):
                self.emit(line)
        except tcam_view.TcamViewError as e:
            raise DebugError(str(e)) from None

    def cmd_info(self, args: list[str], rest: str) -> None:
        if args == ["tcam"]:
            self.cmd_tcam([], "")
            return
        if args:
            raise self.unexpected("info", args[0], self.arg_offset(rest, args, 0))
        if not self.breaks and not self.watches:
            self.emit("no breakpoints or watchpoints")
        for n in sorted([*self.breaks, *self.watches]):
            if n in self.breaks:
                b = self.breaks[n]
                self.emit(f"{n:3d} break {b.spec:<24} {b.where}" + (f" if {b.cond}" if b.cond else "")
                          + f"  hits {b.hits}")  # fmt: skip
                for line in b.places:
                    self.emit(f"      {line}")
            else:
                w = self.watches[n]
                self.emit(f"{n:3d} watch {w.spec}  hits {w.hits}")

    # ------------------------------------------------------------------ state
    def cmd_thread(self, args: list[str], rest: str) -> None:
        if args:
            self.me, self.ctx = self._thread(args[0])
        self.show_here()

    def cmd_where(self, args: list[str], rest: str) -> None:
        pc = self.pc()
        sm = self.target.smap(self.me)
        e = sm.entry(pc)
        self.emit(f"ME {self.nm(self.me)} ctx {self.ctx} pc {pc} at {short(e.file)}:{e.line}" if e else f"pc {pc}")
        for i, f in enumerate(reversed(macro_frames(e) if e else [])):
            self.emit(f"  #{i + 1} {f.name}() called at {short(f.file)}:{f.line}: "
                      f"{sm.source_line(f.file, f.line).strip()}")  # fmt: skip

    def cmd_threads(self, args: list[str], rest: str) -> None:
        self.emit(f"cycle {self.chip.cycle}")
        self.emit("  ME:CTX   state     pc  location                                  waiting on")
        for me in self.target.mes:
            status = self.chip.me_status(me)
            if status["state"] != "running":
                self.emit(f"  ME {self.nm(me)}: {status['state']}" + (f" ({status['reason']})" if status["reason"] else ""))
            for ctx in self.target.ctxs(me):
                state = CTX_STATES[self.chip.reg(me, "state", ctx)]
                pc = self.chip.reg(me, "pc", ctx)
                wait = self.chip.reg(me, "wait", ctx)
                mark = "*" if (me, ctx) == (self.me, self.ctx) else " "
                waiting = self.sig_list(me, wait) if state == "sleep" else ""
                self.emit(f"{mark} {self.nm(me)}:{ctx:<3d} {state:<8s} {pc:4d}  {self.loc(me, pc):<40s}  {waiting}".rstrip())
        if self.target.control is not None:
            self.emit(xscale_line(self.target.control))

    def cmd_signals(self, args: list[str], rest: str) -> None:
        me = self._me(args[0]) if args else self.me
        self.emit(f"ME {self.nm(me)} signals (raised = pending for the context; awaited = its ctx_arb mask)")
        for ctx in self.target.ctxs(me):
            sigs = self.chip.reg(me, "signals", ctx)
            wait = self.chip.reg(me, "wait", ctx)
            state = self.chip.ctx_state(me, ctx)
            self.emit(f"  ctx {ctx} {state:<8s} raised {self.sig_list(me, sigs):<24s} awaited {self.sig_list(me, wait) if state == 'sleep' else '-'}")
        sm = self.target.smap(me)
        if sm.signals:
            self.emit("  names: " + ", ".join(f"{k}=s{v}" for k, v in sorted(sm.signals.items(), key=lambda kv: kv[1])))

    def _raw(self, me: int, ctx: int, kind: int, index: int) -> int:
        out = self.chip.ffi.new("uint32_t *")
        rc = self.chip.lib.npk_reg_read(self.chip._chip, me, ctx, kind, index, out)
        if rc < 0:
            raise DebugError(f"cannot read register kind {kind} index {index}")
        return int(out[0])

    def cmd_regs(self, args: list[str], rest: str) -> None:
        me, ctx = self._thread(args[0]) if args else (self.me, self.ctx)
        sm = self.target.smap(me)
        mode = self.chip.ctx_mode[me]
        nrel = 16 if mode == 8 else 32
        base = ctx * 16 if mode == 8 else (ctx // 2) * 32
        pc = self.chip.reg(me, "pc", ctx)
        cc = self.chip.reg(me, "cc", ctx)
        flags = "".join(f for b, f in ((0, "Z"), (1, "N"), (2, "C"), (3, "V")) if cc >> b & 1) or "-"
        self.emit(f"ME {self.nm(me)} ctx {ctx}  pc {pc}  cc {flags}  state {self.chip.ctx_state(me, ctx)}  at {self.loc(me, pc)}")
        self.emit("registers by .reg name:")
        named: dict[str, list[str]] = {}
        for r in sorted(sm.regs, key=lambda r: (r.kind, r.name, r.scope)):
            try:
                if r.kind == "xfer":
                    half = sm.xfer_half(r.name)
                    v = self.chip.reg(me, f"{r.phys}.{half}", ctx)
                    val = f"0x{v:08x} = {v}  ({'read' if half == 'in' else 'write'} half)"
                else:
                    val = f"0x{self.chip.reg(me, r.phys, ctx):08x} = {self.chip.reg(me, r.phys, ctx)}"
            except EmulatorError:
                continue
            named.setdefault(r.phys, []).append(r.name)
            scope = f"  [{r.scope}]" if r.scope else ""
            self.emit(f"  {r.name:<16s} {r.phys:<6s} {val}{scope}")
        self.emit("GPRs (context-relative):")
        for bank in "ab":
            cells = []
            for i in range(nrel):
                v = self.chip.reg(me, f"{bank}{i}", ctx)
                cells.append(f"{bank}{i}={v:08x}")
            for k in range(0, nrel, 8):
                self.emit("  " + " ".join(f"{c:<12s}" for c in cells[k : k + 8]))
        absolute = [r for r in sm.regs if r.phys.startswith("@")]
        if absolute:
            self.emit("absolute: " + " ".join(f"{r.phys}={self.chip.reg(me, r.phys, ctx):08x}" for r in absolute))
        self.emit("transfer registers (nonzero; in = memory->ME, out = ME->memory):")
        for kind, label in ((K_SIN, "$"), (K_SOUT, "$.out"), (K_DIN, "$$"), (K_DOUT, "$$.out")):
            cells = []
            for i in range(nrel):
                v = self._raw(me, ctx, kind, base + i)
                if v:
                    pre, _, suf = label.partition(".")
                    cells.append(f"{pre}{i}{'.' + suf if suf else ''}={v:08x}")
            if cells:
                for k in range(0, len(cells), 6):
                    self.emit("  " + " ".join(cells[k : k + 6]))
        nn = [(i, self._raw(me, ctx, K_NN, i)) for i in range(128)]
        nn = [(i, v) for i, v in nn if v]
        self.emit("next-neighbour (nonzero, absolute): " + (" ".join(f"n${i}={v:08x}" for i, v in nn[:16]) or "-"))
        csrs = isa().local_csrs
        for w in (0, 1):
            lm_addr = self.chip.reg(me, f"ACTIVE_LM_ADDR_{w}", ctx)
            start = (lm_addr >> 2) & ~3
            words = [self._raw(me, ctx, K_LM, (start + i) % int(self.chip.config["lm_words"])) for i in range(8)]
            self.emit(f"local memory window {w}: ACTIVE_LM_ADDR_{w}=0x{lm_addr:x}  lm[{start}..{start + 7}] "
                      + " ".join(f"{v:08x}" for v in words))  # fmt: skip
        self.emit("CSRs:")
        cells = []
        for name, addr in sorted(csrs.items(), key=lambda kv: kv[1]):
            if name.startswith(("USTORE_", "NULL")):
                continue
            try:
                cells.append(f"{name}={self._raw(me, ctx, K_CSR, addr):08x}")
            except DebugError:
                continue
        for k in range(0, len(cells), 3):
            self.emit("  " + "  ".join(f"{c:<38s}" for c in cells[k : k + 3]).rstrip())
        cam = [(i, self._raw(me, ctx, K_CAM_TAG, i), self._raw(me, ctx, K_CAM_STATE, i))
               for i in range(int(self.chip.config["cam_entries"]))]  # fmt: skip
        self.emit("CAM (entry: tag/state): " + " ".join(f"{i}:{t:08x}/{s:x}" for i, t, s in cam))

    def cmd_set(self, args: list[str], rest: str) -> None:
        m = re.fullmatch(r"(?P<lhs>[^=]*?)\s*=(?!=)\s*(?P<rhs>.*)", rest)
        if not m or not m["lhs"]:
            raise DebugError(f"set what? usage: {self._usage('set')}")
        lhs, rhs = m["lhs"], m["rhs"].strip()
        if not rhs:
            raise DebugError(f"column {len(self._line) + 1}: the value is missing after '=' (usage: {self._usage('set')})")
        mm = re.fullmatch(r"(?P<space>\w+)\s*\[(?P<inner>.*)\]", lhs)
        if mm and mm["space"] in MEM_SPACES:
            self._set_mem(mm["space"], mm["inner"], rhs)
        elif mm or "[" in lhs:
            raise DebugError(f"column {self.column(lhs)}: '{lhs}': memory is sram[ADDR], dram[ADDR] or scratch[ADDR] "
                             "(with a width: dram[ADDR, 1])")  # fmt: skip
        else:
            self._set_reg(lhs, rhs)
        for w in self.watches.values():  # the debugger's own write is no change for a watchpoint
            w.last = self._watch_value(w)

    def _set_value(self, rhs: str, nbytes: int) -> int:
        v = self.eval(rhs)
        if not -(1 << (8 * nbytes - 1)) <= v < 1 << (8 * nbytes):
            shown = f"{'-' if v < 0 else ''}0x{abs(v):x}" if abs(v) < 1 << 64 else f"a {v.bit_length()}-bit number"
            raise DebugError(f"column {self.column(rhs)}: {shown} does not fit in {8 * nbytes} bits")
        return v & ((1 << (8 * nbytes)) - 1)

    def _set_mem(self, space: str, inner: str, rhs: str) -> None:
        addr_text, _, width_text = inner.rpartition(",") if "," in inner else (inner, "", "")
        width = 4
        if width_text.strip():
            width = self._int(width_text.strip())
            if width not in (1, 2, 4, 8):
                raise DebugError(f"column {self.column(width_text.strip())}: the width is 1, 2, 4 or 8 bytes, not {width}")
        addr = self.address(space, addr_text.strip(), width)
        value = self._set_value(rhs, width)
        old = self.chip.mem_read(space, addr, width)
        self.log.mem_write(space, addr, value.to_bytes(width, "big"))
        self.emit(f"{space}[0x{addr:x}] = 0x{value:0{2 * width}x} ({width} byte{'s' if width > 1 else ''}, was 0x{old.hex()})")

    def _set_reg(self, name: str, rhs: str) -> None:
        me, ctx = self.me, self.ctx
        sm = self.target.smap(me)
        phys = self.reg_phys(name)
        if phys is None:
            for table, what in ((sm.labels, "a label"), (sm.signals, "a signal"), (sm.mems, "a memory symbol")):
                if name in table:
                    raise DebugError(f"'{name}' is {what}, a constant of the image (read-only)")
            phys = name
        try:
            ref = self.chip.reg_ref(me, phys, ctx)
        except EmulatorError as e:
            if not str(e).startswith("unknown register"):
                raise DebugError(f"column {self.column(name)}: {e}") from None
            raise DebugError(f"column {self.column(name)}: unknown register '{name}' (a .reg name of "
                             f"{self.target.loaded[me]}, a register such as a0, $1, $$2.out, n$3, lm4, or pc, cc, a CSR)") from None  # fmt: skip
        if ref.kind in (K_STATE, K_WAIT):
            raise DebugError(f"'{name}' is read-only: the context's state and awaited signals change by running it")
        value = self._set_value(rhs, 4)
        if ref.kind == K_PC and value >= len(self.target.program(me).words):
            raise DebugError(f"pc {value} is past the end of program {self.target.loaded[me]} "
                             f"({len(self.target.program(me).words)} words)")  # fmt: skip
        old = self.chip.reg(me, phys, ctx)
        self.log.set_reg(me, phys, value, ctx)
        now = self.chip.reg(me, phys, ctx)
        shown = f"{name} ({phys})" if phys != name else name
        self.emit(f"{shown} = {now} (0x{now:x}), was {old} (0x{old:x})  ME {self.nm(me)} ctx {ctx}")
        if now != value:
            self.emit(f"  the register keeps 0x{now:x}, not 0x{value:x}: some of its bits are read-only or unused")
        if ref.kind == K_PC:
            self.show_here()

    def _show_displays(self, only: list[int] | None = None) -> None:
        """Each display's expression in the current thread; one that does not evaluate there
        (a name of another ME's program) says why instead of stopping the command."""
        for n, text in self.displays.items():
            if only is not None and n not in only:
                continue
            try:
                shown = show_value(self.eval(text))
            except (DebugError, ExprError, EmulatorError) as e:
                shown = f"({e})"
            self.emit(f"{n}: {text} = {shown}")

    def cmd_display(self, args: list[str], rest: str) -> None:
        if not rest:
            if not self.displays:
                self.emit("no displays (display EXPR adds one)")
            self._show_displays()
            return
        self.eval(rest)  # a malformed or unknown expression is an error now
        n = self.next_display
        self.displays[n] = rest
        self.next_display += 1
        self._show_displays([n])

    def cmd_undisplay(self, args: list[str], rest: str) -> None:
        for i, a in enumerate(args):
            if not a.isdigit() or int(a) not in self.displays:
                raise DebugError(f"column {self.column(a, self.arg_offset(rest, args, i))}: no display '{a}' "
                                 "(display lists them)")  # fmt: skip
        nums = [int(a) for a in args] if args else sorted(self.displays)
        for n in nums:
            del self.displays[n]
        self.emit(f"undisplayed {', '.join(map(str, nums))}" if nums else "no displays")

    def cmd_history(self, args: list[str], rest: str) -> None:
        me, ctx, n = self.me, self.ctx, 10
        for a in args:
            if re.fullmatch(r"\d+", a) and not (len(args) == 1 and ":" in a):
                n = self._count(a, "N")
            else:
                me, ctx = self._thread(a)
        self._drain()
        kept = list(self.instrs.get((me, ctx), ()))
        shown = kept[-n:]
        self.emit(f"ME {self.nm(me)} ctx {ctx}: the last {len(shown)} instructions it executed, oldest first "
                  f"({len(kept)} kept, at most {THREAD_HISTORY}; cycle {self.chip.cycle} now)")  # fmt: skip
        if not shown:
            self.emit("  (none since the session began, or they were pushed out of the chip's history)")
        for cycle, pc in shown:
            self.emit(f"  cycle {cycle:>8d}  pc {pc:4d}  {self.instr_text(me, pc):<40s}  {self.loc(me, pc)}")

    def cmd_back(self, args: list[str], rest: str) -> None:
        n = self._count(args[0], "N") if args else 1
        me, ctx = self.me, self.ctx
        blocked = not_rewindable(self.target)
        if blocked:
            raise DebugError(f"back: {blocked}")
        done = self.log.count(me, ctx) - self.log.count(me, ctx, 0)
        if n > done:
            raise DebugError(f"back {n}: ME {self.nm(me)} ctx {ctx} has executed " + (
                f"{done} instruction{'' if done == 1 else 's'} since the session began (back {done} at most)"
                if done else "no instruction since the session began: there is nothing to go back over"))  # fmt: skip
        whole, count = self.log.locate(me, ctx, n)
        was, calls = self.chip.cycle, len(self.log.actions)
        checked, inside = self._replay(whole, count, me, ctx, list(self.instrs.get((me, ctx), ())))
        self.me, self.ctx = me, ctx
        self._reinstall_points()
        self.faults_seen = self.chip.faults()["total"]
        part = f"{whole} of its {calls} calls to the chip" + (", then part of the next" if inside else "")
        self.emit(f"back {n} instruction{'s' if n > 1 else ''} of ME {self.nm(me)} ctx {ctx}: the target opened again, "
                  f"the session replayed on it ({part}); cycle {self.chip.cycle} (was {was}), the thread's "
                  f"instruction {count - self.log.count(me, ctx, 0) + 1} of the session is next")  # fmt: skip
        self.emit(checked)
        self.show_here()

    def _replay(self, whole: int, count: int, me: int, ctx: int, kept: list[tuple[int, int]]) -> tuple[str, bool]:
        """Open the target again and replay the session on it up to ME:CTX's count, checked
        against the thread's history `kept`; the session then goes on there (on failure it
        stays where it was).  Returns _check_back's line, and whether it stopped inside a call."""
        assert self.target.reopen is not None
        try:
            fresh = self.target.reopen()
        except (TargetError, ValueError) as e:
            raise DebugError(f"back: the target cannot be opened again: {e}") from None
        old = (self.target, self.chip, self.log, self.instrs, self.events, self.sram_queues, self.sram_rings)
        try:
            changed = [self.nm(m) for m in self.target.mes if m not in fresh.loaded
                       or fresh.program(m).words != self.target.program(m).words]  # fmt: skip
            if changed:
                raise RewindError(f"the code built again for ME {', '.join(changed)} differs from the session's "
                                  "(its sources changed on disk since the session began)")  # fmt: skip
            fresh.parts, fresh.maps = self.target.parts, self.target.maps  # the source maps as found (--source-dir)
            fresh.chip.history_enable(2)
            self.target, self.chip, self.log = fresh, fresh.chip, Recorder(fresh.chip, fresh.mes)
            self.instrs, self.events, self.sram_queues, self.sram_rings = {}, deque(maxlen=HISTORY_KEEP), set(), set()
            inside = old[2].replay(self.log, whole, count, me, ctx, self._drain)
            checked = self._check_back(kept, me, ctx, count)
        except (RewindError, EmulatorError) as e:
            fresh.close()
            self.target, self.chip, self.log, self.instrs, self.events, self.sram_queues, self.sram_rings = old
            raise DebugError(f"back: {e}") from None
        old[0].close()
        return checked, inside

    def _reinstall_points(self) -> None:
        """The breakpoints and watchpoints as they are now (not as they were back then) on
        the replayed chip, under the ids it gives them; a watchpoint's value is the one there."""
        for cid in sorted(self.log.bps):
            self.log.del_breakpoint(cid)
        for cid in sorted(self.log.wps):
            self.log.del_watchpoint(cid)
        for bp in self.breaks.values():
            bp.ids = [(self.log.add_breakpoint(pc, me=me), pc) for me, pc in bp.at]
        for w in self.watches.values():
            if w.reg:
                w.cid = self.log.add_watchpoint(w.reg, me=w.me, ctx=w.ctx)
            else:
                w.cid = self.log.add_watchpoint(f"{w.space}:{w.addr}", length=w.length)
            w.last = self._watch_value(w)

    def _check_back(self, kept: list[tuple[int, int]], me: int, ctx: int, count: int) -> str:
        """The replayed thread against the session's record: its instruction count, and its
        pc against the instruction the history recorded as its next one (the first at or
        after the cycle now, when the history still holds the time before); RewindError
        when they differ."""
        now, pc = self.chip.cycle, self.pc(me, ctx)
        if self.log.count(me, ctx) != count:
            raise RewindError(f"the replayed thread has executed {self.log.count(me, ctx)} instructions, not {count}")
        nxt = next(((c, p) for c, p in kept if c >= now), None)
        if nxt is None or (len(kept) >= THREAD_HISTORY and kept[0][0] >= now):
            return f"  (its next instruction, pc {pc}, is older than the {len(kept)} the history keeps: not checked)"
        if nxt[1] != pc:
            raise RewindError(f"the replayed thread is at pc {pc}, but the history recorded pc {nxt[1]} at cycle "
                              f"{nxt[0]} as its next instruction")  # fmt: skip
        return f"  checked: the history recorded pc {pc} as the thread's next instruction, at cycle {nxt[0]}"

    def cmd_print(self, args: list[str], rest: str) -> None:
        if not rest:
            raise DebugError("print EXPR")
        entry = tcam_view.ENTRY_RE.match(rest)
        if entry:
            try:
                self.emit(tcam_view.entry_text(self.chip, self.eval(entry["n"]), self.target.image.meta))
            except tcam_view.TcamViewError as e:
                raise DebugError(str(e)) from None
            return
        self.emit(f"{rest} = {show_value(self.eval(rest))}")

    def cmd_mem(self, args: list[str], rest: str) -> None:
        if len(args) < 2 or args[0] not in MEM_SPACES:
            raise DebugError("mem sram|dram|scratch ADDR [LEN]")
        if len(args) > 3:
            raise self.unexpected("mem", args[3], self.arg_offset(rest, args, 3))
        length = self._length(args[2], MAX_DUMP) if len(args) > 2 else 64
        addr = self.address(args[0], args[1], length)
        data = self.chip.mem_read(args[0], addr, length)
        self.emit(f"{args[0]} 0x{addr:x}, {length} bytes:")
        for ln in pkt.hexdump(data, addr):
            self.emit(ln)

    def cmd_rings(self, args: list[str], rest: str) -> None:
        any_ring = False
        names = views.ring_names(self.target.image.meta)
        for r in range(int(self.chip.config["scratch_rings"])):
            info = self.chip.scratch_ring_info(r)
            if not info["size"]:
                continue
            any_ring = True
            full = " FULL" if info["count"] + info["full_margin"] >= info["size"] else ""
            name = f"  {names[r]}" if r in names else ""
            self.emit(f"scratch ring {r:2d}: base 0x{info['base']:04x} size {info['size']:4d} words  "
                      f"count {info['count']:4d}{full}{name}")  # fmt: skip
        if not any_ring:
            self.emit("no scratch ring is configured")
        for a in sorted(self.sram_rings):
            d = [self.chip.read32("sram", a + 4 * i) for i in range(5)]
            self.emit(f"sram ring at 0x{a:08x}: base 0x{d[3]:x} size {d[4]} count {d[2]} head {d[0]} tail {d[1]}")

    def cmd_queues(self, args: list[str], rest: str) -> None:
        addrs = sorted({self._queue_address(a) for a in args} or self.sram_queues)
        if not addrs:
            self.emit("no SRAM queue used yet (queues ADDR... reads descriptors at ADDR)")
            return
        for a in addrs:
            head, tail, count = (self.chip.read32("sram", a + 4 * i) for i in range(3))
            chain = []
            p = head
            while p and len(chain) < min(count, 8):
                chain.append(f"0x{p:x}")
                p = self.chip.read32("sram", p)
            more = " ..." if count > len(chain) else ""
            self.emit(f"queue 0x{a:08x}: count {count} head 0x{head:x} tail 0x{tail:x}"
                      + (f"  [{' '.join(chain)}{more}]" if chain else ""))  # fmt: skip

    def _queue_address(self, text: str) -> int:
        """A queue descriptor's SRAM address: three longwords, so a multiple of 4."""
        addr = self.address("sram", text, 12)
        if addr & 3:
            raise DebugError(f"column {self.column(text)}: queue descriptor address 0x{addr:x} is not a "
                             f"multiple of 4 (descriptors are longwords: 0x{addr & ~3:x}?)")  # fmt: skip
        return addr

    def _packet_convention(self, me: int) -> tuple[str, int | None]:
        """The expression for the DRAM address of the packet a thread of ME handles, and the
        frame's offset in its buffer when the convention says it ('' when there is none)."""
        pad: int | None = None
        dbg = self.target.image.meta.get("debug") or {}
        expr = str(dbg.get("packet", "")) if isinstance(dbg, dict) else ""
        if isinstance(dbg, dict) and "packet_pad" in dbg:
            pad = int(dbg["packet_pad"])
        sysmap = self.target.image.meta.get("sysmap")
        sm = self.target.smap(me)
        if not expr and isinstance(sysmap, dict) and sm.reg_candidates("pw"):
            # a linked router: pw = V | in_port << 28 | buffer index (microcode/README.md §3.1)
            expr = f"((pw & 0xffff) << {sysmap['buf_shift']}) + {sysmap['buf_base']}"
            pad = int(sysmap.get("pkt_pad", 0)) if pad is None else pad
        if not expr:
            expr = next((n for n in pkt.CONVENTION_REGS if sm.reg_candidates(n)), "")
        return expr, pad

    def packet_id(self, me: int, ctx: int) -> int:
        """The traffic id (NPK1 tag) of the frame in the buffer the thread handles, by the
        `packet` command's convention; -1 when the frame carries none."""
        expr, pad = self._packet_convention(me)
        if not expr:
            raise DebugError(f"'packet' in an expression: the program on ME {self.nm(me)} has no packet convention "
                             f"(a register {'/'.join(pkt.CONVENTION_REGS)}, or a router's pw)")  # fmt: skip
        addr = evaluate(expr, lambda n: self.reg_value(n, me, ctx))
        if not self.mem_ok("dram", addr, 64):
            return -1
        head = self.chip.mem_read("dram", addr, 64 + (pad or 0))
        start = pkt.guess_pad(head) if pad is None else pad
        frame = self.chip.mem_read("dram", addr + start, pkt.frame_length(head[start:]))
        gid = pkt.traffic_id(frame)
        return -1 if gid is None else gid

    def cmd_packet(self, args: list[str], rest: str) -> None:
        pad: int | None = None
        length: int | None = None
        m = re.search(r"\bpad\s+(\S+)", rest)
        if m:
            pad = self._int(m[1])
            rest = rest[: m.start()] + rest[m.end() :]
        m = re.search(r"\blen\s+(\S+)", rest)
        if m:
            length = self._length(m[1], MAX_DUMP)
            rest = rest[: m.start()] + rest[m.end() :]
        expr = rest.strip()
        how = expr
        if not expr:
            expr, conv_pad = self._packet_convention(self.me)
            if not expr:
                raise DebugError("which packet? give its DRAM address: packet EXPR (e.g. packet buf), "
                                 f"or name a register {'/'.join(pkt.CONVENTION_REGS)} in the program")  # fmt: skip
            pad = conv_pad if pad is None else pad
            how = f"{expr} (by convention)"
        addr = self.address("dram", expr) if expr == rest.strip() else self.address("dram", str(self.eval(expr)))
        head = self.chip.mem_read("dram", addr, min(64, int(self.chip.config["dram_bytes"]) - addr))
        if pad is None:
            pad = pkt.guess_pad(head)
        if length is None:
            length = pkt.frame_length(head[pad:])
        if pad < 0 or length < 1 or not self.mem_ok("dram", addr + pad, length):
            raise DebugError(f"a frame of {length} bytes at dram 0x{addr:x} + {pad} is out of range; "
                             f"{self.mem_limits('dram')}")  # fmt: skip
        frame = self.chip.mem_read("dram", addr + pad, length)
        self.emit(f"packet at dram 0x{addr:x} = {how}" + (f", frame at +{pad}" if pad else "") + f", {length} bytes")
        for ln in pkt.decode(frame):
            self.emit(ln)
        gid = pkt.traffic_id(frame)
        if gid is not None:
            self.emit(f"  traffic   packet id {gid} (NPK1 tag in the payload)")
        for ln in pkt.hexdump(frame[:64], addr + pad):
            self.emit(ln)
        if length > 64:
            self.emit(f"  ... {length - 64} more bytes (mem dram 0x{addr + pad + 64:x} {length - 64})")

    def cmd_list(self, args: list[str], rest: str) -> None:
        me = self.me
        sm = self.target.smap(me)
        pc = self.pc()
        cur = sm.entry(pc)
        m = re.fullmatch(r"(.+):(\d+)", args[0]) if args else None
        if m:
            files = [f for f in sm.files() if _same_file(f, m[1])]
            if not files:
                raise DebugError(f"no code from a file named '{m[1]}'")
            cfile, cline = files[0], int(m[2])
        elif args:
            me_pc = self.resolve_location(args[0])
            me, addr = next(((m_, a) for m_, a in me_pc if m_ == self.me), me_pc[0])
            sm = self.target.smap(me)
            e = sm.entry(addr)
            if e is None:
                raise DebugError("no line information there")
            cfile, cline = e.file, e.line
        elif cur is not None:
            cfile, cline = cur.file, cur.line
        else:
            raise DebugError("no line information here")
        lines = sm.text(cfile)
        if lines is None:
            raise DebugError(sm.missing(cfile))
        if not 1 <= cline <= len(lines):
            raise DebugError(f"{short(cfile)} has lines 1..{len(lines)}, not {cline}")
        lo, hi = max(1, cline - 5), min(len(lines), cline + 5)
        self.emit(f"{short(cfile)}:")
        for n in range(lo, hi + 1):
            mark = "=>" if cur is not None and cur.file == cfile and cur.line == n else "  "
            self.emit(f"{mark}{n:5d}  {lines[n - 1]}".rstrip())
        frames = macro_frames(cur) if cur is not None and not args else []
        if frames:
            f = frames[0]
            self.emit(f"  (in macro {frames[-1].name}, expanded from {short(f.file)}:{f.line}: "
                      f"{sm.source_line(f.file, f.line).strip()})")  # fmt: skip

    def cmd_stats(self, args: list[str], rest: str) -> None:
        st = self.chip.stats()
        cyc = st["cycle"] or 1
        self.emit(f"cycle {st['cycle']}")
        for m in st["mes"]:
            if m["me"] not in self.target.loaded:
                continue
            self.emit(f"ME {m['me_name']} {self.target.loaded[m['me']]:<12s} {m['status']:<7s} instr {m['instructions']:>8d}"
                      f"  exec {m['executing_cycles']:>8d}  aborted {m['aborted_cycles']:>6d}  stalled {m['stalled_cycles']:>6d}"
                      f"  idle {m['idle_cycles']:>8d}  util {100 * (m['executing_cycles'] + m['aborted_cycles'] + m['stalled_cycles']) / cyc:5.1f}%"
                      f"  swaps {m['ctx_swaps']}")  # fmt: skip
            self.out += format_context_rows(m["me_name"], context_rows(m))
        for name, chans in st["units"].items():
            for i, c in enumerate(chans):
                if c["commands"]:
                    self.emit(f"  {name}[{i}] commands {c['commands']} bytes {c['bytes']} util {100 * c['utilization']:.1f}%"
                              f" queue max {c['queue_max']}")  # fmt: skip

        run = self.target.traffic
        dev = getattr(run, "dev", None)
        if dev is not None:
            for port in range(dev.ports):
                ps = dev.port_stats(port)
                if ps["rx_offered"] or ps["tx_frames"]:
                    self.emit(f"  msf port {port}: rx offered {ps['rx_offered']} received {ps['rx_received']}"
                              f" {views.msf_drops(ps)}  tx frames {ps['tx_frames']} bytes {ps['tx_bytes']}")  # fmt: skip
        h = self.target.harness
        if h is not None:
            from npkit.toolchain.system.sysmap import read_counters

            c = read_counters(self.chip)
            for ps in c["ports"]:
                self.emit(f"  router port {ps['port']}: rx {ps['rx_pkts']} pkts {ps['rx_bytes']} B"
                          f"  tx {ps['tx_pkts']} pkts {ps['tx_bytes']} B")  # fmt: skip
            flying = views.counters_in_flight(self.events, self.target.image.meta.get("sysmap") or {})
            if flying:
                self.emit(f"  ({flying} counter update{'s' if flying > 1 else ''} issued and not landed yet: "
                          "a packet's count and its bytes are two commands)")  # fmt: skip
            for line in views.reason_lines(c):
                self.emit(line)
            self.emit(f"  host stand-ins: {h.sent} messages sent, {len(h.outputs())} forwarded, "
                      f"{len(h.exceptions())} exceptions, drops by code {h.drops()}")  # fmt: skip

        if self.target.control is not None and hasattr(self.target.control, "sub"):   # the SPP's I3 daemon
            self.emit(xscale_line(self.target.control))
            i3 = self.target.control.summary()
            if i3.get("running"):
                self.emit(f"  i3d: { {k: v for k, v in i3['counters'].items() if v} }; GPE delay ns {i3['gpe_delay_ns']}")
        elif self.target.control is not None:
            from npkit.toolchain.system.control import stats_summary

            self.emit(xscale_line(self.target.control))
            st = stats_summary(self.target.control.stats())
            if st.get("running"):
                self.emit(f"  control plane ({st['state']}): exceptions {st['exceptions_handled']}")
                self.emit(f"  ICMP sent {({k: v for k, v in st['icmp_sent'].items() if v})}, suppressed by rate limit "
                          f"{st['icmp_suppressed_by_rate_limit']}, ARP replies {st['arp_replies_sent']} requests "
                          f"{st['arp_requests_sent']}, held {st['packets_held_for_arp']} dropped "
                          f"{st['held_packets_dropped']}, routes {st['routes']}")  # fmt: skip

    def cmd_cycle(self, args: list[str], rest: str) -> None:
        c = self.chip.cycle
        self.emit(f"cycle {c} ({c * 1000 / self.target.clock_mhz:.1f} ns at {self.target.clock_mhz:g} MHz)")

    def cmd_help(self, args: list[str], rest: str) -> None:
        if args:
            name = self.aliases.get(args[0], args[0])
            if name not in self.commands:
                raise DebugError(f"no command '{args[0]}'")
            self.emit(self.commands[name][1])
            return
        self.emit("commands (unique prefixes work; aliases: " + ", ".join(f"{k}={v}" for k, v in self.aliases.items()) + "):")
        for _, (_, text) in self.commands.items():
            self.emit("  " + text)


def xscale_line(control: Any) -> str:
    """The control processor in one line: state, PC and function, what it waits on,
    instructions executed."""
    st = control.system.status() or {}
    where = f" pc {st['pc']:#x} in {st.get('function') or '?'}" if "pc" in st else ""
    what = f", waiting on {st['waiting_on']}" if st.get("waiting_on") else ""
    return (f"  XScale [{st.get('placement', '?')}] {control.program.name}: {st.get('state', '?')}{where}{what}, "
            f"{st.get('instructions', 0)} instructions, {st.get('interrupts', 0)} interrupts, starts {st.get('starts', 1)}")
