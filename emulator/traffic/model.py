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
"""

from __future__ import annotations

import importlib.util
import struct
import sys
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from .cpkt import DROP, EXCEPTION, PYTHON, REASONS, Verdicts
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

    def matches(self, address: int) -> bool:
        """Whether `address` (an int) is in the prefix."""
        return address & self.mask == self.addr


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


def load_model(path: str | Path, reasons: Reasons, tables: Mapping[str, Any] | None = None) -> Model:
    """The rules of the application's `model.py` (every module-level Rule, in the order of
    their place among the base's rules, then of definition)."""
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
        tb = e.__traceback__
        line = 0
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(p):
                line = tb.tb_lineno
            tb = tb.tb_next
        raise ModelError(f"{p}:{line}: {type(e).__name__}: {e}") from None
    finally:
        sys.modules.pop(name, None)
    rules = [v for v in vars(module).values() if isinstance(v, Rule)]
    rules.sort(key=lambda r: r.line)
    return Model(rules, reasons, dict(tables or {}), str(p))
