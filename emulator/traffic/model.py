"""An application's reference model, composed per block (docs/applications.md, "model.py").

The IPv4 router's model is the oracle (npkit.emulator.traffic.oracle, and at C speed
npkit.emulator.traffic.cpkt.oracle_window): it applies the rules of reasons.yaml in the
order of their `step`, the first that matches deciding.  An application that adds a
block adds rules in its `model.py`, each placed right after one of the base's rules::

    from npkit.emulator.traffic.model import rule, ipv4_fields

    @rule(after="no_route", drop="acl_deny")
    def acl(frame: bytes, tables: dict) -> bool:
        f = ipv4_fields(frame)
        return f is not None and f.dport == 23

A rule gets the input frame (Ethernet first) and the application's tables, and says
whether it matches.  The composition, packet by packet: the base's outcome decided at or
before the rule's place (a drop or exception whose step is at most the step of `after`)
stands; otherwise the application's rules run in order and the first that matches gives
its outcome; if none matches, the base's outcome stands (a forwarded frame, or a later
drop or exception).  `apply` does this on a window of verdicts (cpkt.Verdicts) at once,
running Python only for the packets that reach a rule.

An application without a base (no `extends:`: a data path of its own, such as
examples/apps/udplb) has no oracle to compose with: its model **decides every frame**.
It defines one function marked `@decide`, which gets the frame, its input port and a
Context (the tables, the router config, what an optional `setup` made of them) and
returns `forward(port, frame_bytes)`, `drop(reason)` or `exception(reason)`::

    @decide
    def lb(frame: bytes, in_port: int, ctx: Context) -> Verdict:
        return drop("lb_not_udp") if frame[23] != 17 else forward(1, frame)

`StandaloneModel.verdicts` runs it on a window at once (the batch API the judge uses:
cpkt.Verdicts, as the C oracle gives them).
"""

from __future__ import annotations

import gc
import importlib.util
import struct
import sys
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from .cpkt import DROP, EXCEPTION, FORWARD, PYTHON, REASONS, Verdicts
from .reasons import ReasonError, Reasons

Test = Callable[[bytes, Mapping[str, Any]], bool]


class ModelError(ValueError):
    """A model.py that cannot be used: the message names the file (and line) and the rule."""


@dataclass(frozen=True)
class Rule:
    """One rule of an application's model: `test(frame, tables)` true -> `kind` `reason`."""

    name: str
    test: Test
    after: str  # the base rule (a reason name) this one comes right after
    kind: str  # "drop" or "exception"
    reason: str
    line: int = 0  # where it is defined (for messages)

    def __call__(self, frame: bytes, tables: Mapping[str, Any]) -> bool:
        try:
            return bool(self.test(frame, tables))
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's code: any error is reported, located
            raise ModelError(self._where(e) + f"rule {self.name}: {type(e).__name__}: {e} (on a frame of "
                             f"{len(frame)} bytes: {frame[:34].hex()}...)") from None  # fmt: skip

    def _where(self, e: BaseException) -> str:
        """`file:line: ` of the deepest frame of the rule's own file in e's traceback."""
        code = getattr(self.test, "__code__", None)
        if code is None:
            return ""
        line, tb = self.line, e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == code.co_filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        return f"{code.co_filename}:{line}: "


def rule(*, after: str, drop: str | None = None, exception: str | None = None) -> Callable[[Test], Rule]:
    """Declare a rule of the model (see the module doc): right after the base's rule
    `after`, it drops (or hands to the control plane) with the given reason."""
    if (drop is None) == (exception is None):
        raise ModelError(f"rule after {after!r}: give drop=REASON or exception=REASON (one of them)")
    kind, reason = ("drop", drop) if drop is not None else ("exception", exception)
    assert reason is not None

    def make(fn: Test) -> Rule:
        code = getattr(fn, "__code__", None)
        return Rule(getattr(fn, "__name__", "rule"), fn, after, kind, reason, code.co_firstlineno if code else 0)

    return make


class Fields(NamedTuple):
    """What rules usually test, read from an IPv4 frame (ipv4_fields)."""

    src: int
    dst: int
    proto: int
    sport: int  # 0 when the frame carries no TCP/UDP header at its start
    dport: int
    first_fragment: bool  # fragment offset 0 (an unfragmented packet too)
    ttl: int


class Prefix(NamedTuple):
    """An IPv4 prefix of a table row (tables.yaml `type: prefix`)."""

    addr: int
    length: int

    @property
    def mask(self) -> int:
        return (0xFFFFFFFF << (32 - self.length)) & 0xFFFFFFFF

    @property
    def value(self) -> int:
        """The address (as a TCAM key field's `value`, beside `mask`: Ternary)."""
        return self.addr

    def matches(self, address: int) -> bool:
        """Whether `address` (an int) is in the prefix."""
        return address & self.mask == self.addr


class Ternary(NamedTuple):
    """A key field of a TCAM table row (tables.yaml `memory: tcam`): value and mask of
    `bits` bits (mask bit 1 = compare; a wildcard has mask 0)."""

    value: int
    mask: int
    bits: int

    def matches(self, x: int) -> bool:
        return (x ^ self.value) & self.mask == 0


def tcam_match(rows: list[dict[str, Any]], key: Mapping[str, int]) -> list[dict[str, Any]]:
    """The rows of a TCAM table (tables["name"]) that `key` (field -> int) matches, in
    priority order (their TCAM position): [0] is the TCAM's answer, len() its match count.
    A key field the row declares but `key` lacks is a ModelError."""
    def hit(row: dict[str, Any]) -> bool:
        for name, v in row.items():
            if isinstance(v, (Ternary, Prefix)):
                if name not in key:
                    raise ModelError(f"tcam_match: the key lacks field {name!r}")
                if not v.matches(key[name]):
                    return False
        return True

    return sorted((r for r in rows if hit(r)), key=lambda r: r.get("_entry", 0))


_ETH_IPV4 = b"\x08\x00"


def ipv4_fields(frame: bytes) -> Fields | None:
    """The IPv4 fields of an Ethernet frame, None when it is not IPv4 or too short."""
    if len(frame) < 34 or frame[12:14] != _ETH_IPV4:
        return None
    ihl = (frame[14] & 0xF) * 4
    frag = struct.unpack_from("!H", frame, 20)[0]
    first = frag & 0x1FFF == 0
    proto = frame[23]
    sport = dport = 0
    l4 = 14 + ihl
    if first and proto in (6, 17) and len(frame) >= l4 + 4:
        sport, dport = struct.unpack_from("!HH", frame, l4)
    src, dst = struct.unpack_from("!II", frame, 26)
    return Fields(src, dst, proto, sport, dport, first, frame[22])


@dataclass
class Model:
    """An application's rules, placed among the base's (`reasons`: the combined table)."""

    rules: list[Rule]
    reasons: Reasons
    tables: Mapping[str, Any]
    source: str = "<model>"

    standalone = False  # (StandaloneModel: True)

    def __post_init__(self) -> None:
        steps = {r.name: r.step for r in self.reasons.in_order()}
        self._at: list[int] = []
        for r in self.rules:
            where = f"{self.source}:{r.line}: rule {r.name}"
            if r.after not in steps:
                raise ModelError(f"{where}: after={r.after!r} is not one of the base's rules "
                                 f"({', '.join(n for n in steps if n not in self._own())})")  # fmt: skip
            try:
                self.reasons.get("drop" if r.kind == "drop" else "exception", r.reason)
            except ReasonError as e:
                raise ModelError(f"{where}: {e} (declare it in the application's reasons.yaml)") from None
            self._at.append(int(steps[r.after] or 0))
        order = sorted(range(len(self.rules)), key=lambda k: self._at[k])
        self.rules = [self.rules[k] for k in order]
        self._at = [self._at[k] for k in order]
        # reason code -> the step the base decided at (the C oracle's REASONS indices)
        step_of = {n: s for n, s in steps.items()}
        self._decided = array("i", [int(step_of.get(n) or 0) if n else 1 << 30 for n in REASONS])
        self.names: tuple[str, ...] = (*REASONS, *dict.fromkeys(r.reason for r in self.rules))
        self._index = {n: k for k, n in enumerate(self.names)}
        self.frames_run = 0  # frames a rule was run on (npk bench traffic)

    def _own(self) -> set[str]:
        return {r.reason for r in self.rules}

    def apply(self, v: Verdicts, data: bytes | bytearray, off: array[int], lens: array[int]) -> Verdicts:
        """The composed verdicts of a window: `v` (the base's) with the rules applied."""
        if not self.rules:
            return v
        v = replace(v, names=self.names)
        first = self._at[0]
        decided, kind, reason = self._decided, v.kind, v.reason
        rules, at = self.rules, self._at
        index, tables = self._index, self.tables
        mv = memoryview(data)
        for i in range(len(lens)):
            if kind[i] == PYTHON:
                continue  # left to the Python oracle: not the C oracle's to compose
            s = decided[reason[i]] if kind[i] else 1 << 30  # FORWARD: after every rule
            if s <= first:
                continue
            frame = bytes(mv[off[i] : off[i] + lens[i]])
            self.frames_run += 1
            for r, a in zip(rules, at, strict=True):
                if s <= a:
                    break
                if r(frame, tables):
                    kind[i] = DROP if r.kind == "drop" else EXCEPTION
                    reason[i] = index[r.reason]
                    break
        return v


class Verdict(NamedTuple):
    """What a standalone model decides for one frame (forward / drop / exception)."""

    kind: int  # cpkt FORWARD, DROP or EXCEPTION
    reason: str  # "" when forwarded
    port: int = 0
    frame: bytes = b""


def forward(port: int, frame: bytes | bytearray) -> Verdict:
    """The frame leaves on output port `port` with exactly these bytes (as long as the
    input frame: the judge keeps output bytes at the input's offsets)."""
    return Verdict(FORWARD, "", port, frame if type(frame) is bytes else bytes(frame))


@lru_cache(maxsize=1024)
def drop(reason: str) -> Verdict:
    """The frame is dropped with `reason` (a drop the application's reasons declare)."""
    return Verdict(DROP, reason)


@lru_cache(maxsize=1024)
def exception(reason: str) -> Verdict:
    """The frame is handed to the control plane with `reason` (a declared exception)."""
    return Verdict(EXCEPTION, reason)


@dataclass(frozen=True)
class Context:
    """What a standalone model's function sees besides the frame."""

    tables: Mapping[str, Any]  # table name -> rows (see "Tables")
    router: Any  # the router config (npkit.emulator.traffic.router_config.RouterConfig): ports, MACs
    state: Any = None  # what the model's `setup(tables, router)` returned (None without one)


Decide = Callable[[bytes, int, Context], Verdict]


@dataclass(frozen=True)
class Decider:
    """A standalone model's function (`@decide`) and its optional setup."""

    name: str
    fn: Decide
    setup: Callable[[Mapping[str, Any], Any], Any] | None = None
    line: int = 0


def decide(fn: Decide | None = None, *, setup: Callable[[Mapping[str, Any], Any], Any] | None = None) -> Any:
    """Mark the function that decides every frame of an application without a base:
    `@decide` or `@decide(setup=fn)`, `fn(tables, router)` run once when the model is
    loaded (indexes of the tables, checks of their rows) giving `ctx.state`."""

    def make(f: Decide) -> Decider:
        code = getattr(f, "__code__", None)
        return Decider(getattr(f, "__name__", "decide"), f, setup, code.co_firstlineno if code else 0)

    return make(fn) if fn is not None else make


class StandaloneModel:
    """An application's own model: its `@decide` function judges every frame (no oracle)."""

    standalone = True

    def __init__(self, decider: Decider, reasons: Reasons, tables: Mapping[str, Any], router: Any,
                 source: str = "<model>") -> None:  # fmt: skip
        self.decider, self.reasons, self.source = decider, reasons, source
        self.tables = tables
        self.names: tuple[str, ...] = ("", *reasons.drops, *reasons.exceptions)
        self._code = {(DROP, n): k for k, n in enumerate(self.names) if n in reasons.drops}
        self._code.update({(EXCEPTION, n): k for k, n in enumerate(self.names) if n in reasons.exceptions})
        if len(self.names) > 255:
            raise ModelError(f"{source}: {len(self.names) - 1} reasons: a window's verdicts hold at most 255")
        state = None
        if decider.setup is not None:
            state = _located(source, lambda: decider.setup(tables, router))  # type: ignore[misc]
        self.ctx = Context(tables, router, state)
        self.frames_run = 0

    def decide(self, frame: bytes, in_port: int) -> Verdict:
        """The model's verdict on one frame."""
        return _located(self.source, lambda: self._checked(self.decider.fn(frame, in_port, self.ctx), len(frame)))

    def verdicts(self, data: bytes | bytearray, off: array[int], lens: array[int], ports: Any) -> Verdicts:
        """The batch API: every frame of a window (`data` at `off`, `lens`; input `ports`)
        judged, as the C oracle's oracle_window gives them.  The garbage collector is
        held off meanwhile: a verdict a frame makes no cycles, and in a process holding
        many objects its collections, which allocation sets off, cost more than the model."""
        was = gc.isenabled()
        gc.disable()
        try:
            return _located(self.source, lambda: self._window(data, off, lens, ports))
        finally:
            if was:
                gc.enable()

    def _window(self, data: bytes | bytearray, off: array[int], lens: array[int], ports: Any) -> Verdicts:
        n = len(lens)
        kind, reason, port = bytearray(n), bytearray(n), bytearray(n)
        out = bytearray(data)
        frames = data if type(data) is bytes else bytes(data)  # (a slice of bytes is bytes)
        fn, ctx, code = self.decider.fn, self.ctx, self._code
        for i, (o, ln, p) in enumerate(zip(off, lens, ports, strict=True)):
            v = fn(frames[o : o + ln], p, ctx)
            if type(v) is Verdict and v.kind == FORWARD and len(v.frame) == ln and 0 <= v.port < 256:
                port[i] = v.port
                out[o : o + ln] = v.frame
                continue
            k = code.get((v.kind, v.reason)) if type(v) is Verdict else None
            if k is None:
                self._checked(v, ln)
            kind[i], reason[i] = v.kind, k  # type: ignore[assignment]
        self.frames_run += n
        return Verdicts(kind, reason, port, out, self.names)

    def _checked(self, v: Any, length: int) -> Verdict:
        """`v` if it is a verdict the judge can use, else a ModelError saying why."""
        where = f"{self.source}:{self.decider.line}: {self.decider.name}"
        if type(v) is not Verdict:
            raise ModelError(f"{where} returned {v!r}: return forward(port, frame), drop(reason) or exception(reason)")
        if v.kind == FORWARD:
            if len(v.frame) != length:
                raise ModelError(f"{where}: forward() of {len(v.frame)} bytes for a frame of {length}: "
                                 "a forwarded frame keeps its length")  # fmt: skip
            if not 0 <= v.port < 256:
                raise ModelError(f"{where}: forward() to port {v.port}: ports are 0..255")
            return v
        what = "drop" if v.kind == DROP else "exception"
        if (v.kind, v.reason) not in self._code:
            raise ModelError(f"{where}: {what}({v.reason!r}): no {what} reason of that name "
                             "(declare it in the application's reasons.yaml)")  # fmt: skip
        return v


def _located(source: str, call: Callable[[], Any]) -> Any:
    """`call()`, an error of the model's own code turned into a ModelError at its line."""
    try:
        return call()
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: any error is reported, located
        raise ModelError(f"{source}:{_line_in(e, source)}: {type(e).__name__}: {e}") from None


def _line_in(e: BaseException, source: str) -> int:
    tb, line = e.__traceback__, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == source:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


AnyModel = Model | StandaloneModel


def load_model(path: str | Path, reasons: Reasons, tables: Mapping[str, Any] | None = None,
               router: Any = None) -> AnyModel:  # fmt: skip
    """The application's `model.py`: its rules (every module-level Rule, in the order of
    their place among the base's rules, then of definition), or its `@decide` function
    (a StandaloneModel, `router` the router config it gets)."""
    p = Path(path)
    name = f"npk_app_model_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ModelError(f"{p}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModelError as e:
        raise ModelError(f"{p}: {e}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's code: any error is reported, located
        raise ModelError(f"{p}:{_line_in(e, str(p))}: {type(e).__name__}: {e}") from None
    finally:
        sys.modules.pop(name, None)
    rules = [v for v in vars(module).values() if isinstance(v, Rule)]
    rules.sort(key=lambda r: r.line)
    deciders = sorted((v for v in vars(module).values() if isinstance(v, Decider)), key=lambda d: d.line)
    if deciders:
        if len(deciders) > 1 or rules:
            more = deciders[1] if len(deciders) > 1 else rules[0]
            raise ModelError(f"{p}:{more.line}: {more.name}: a model decides every frame with one @decide "
                             f"function ({deciders[0].name}, line {deciders[0].line}) and has no rules")  # fmt: skip
        model: AnyModel = StandaloneModel(deciders[0], reasons, dict(tables or {}), router, str(p))
    else:
        model = Model(rules, reasons, dict(tables or {}), str(p))
    from .groups import Grouper  # groups of packets with their own account (groups.py)

    groupers = [v for v in vars(module).values() if isinstance(v, Grouper)]
    model.grouper = groupers[0] if groupers else None  # type: ignore[union-attr]
    return model
