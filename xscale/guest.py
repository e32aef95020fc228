"""The guest's side of the XScale core that its Linux system calls (npkit.xscale.linux)
work on: the address-space layout, a system call that waits, and the core as the
system calls see it (`Guest`, which npkit.xscale.core.XScaleCore is)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

PAGE = 4096
STACK_TOP = 0x7FFF0000
STACK_SIZE = 8 << 20
MMAP_BASE = 0x40000000
MMAP_END = 0x7F000000
KUSER_PAGE = 0xFFFF0000
TLS_SLOT = 0xFFFF0FF0


def page_up(n: int) -> int:
    return (n + PAGE - 1) & ~(PAGE - 1)


def page_down(n: int) -> int:
    return n & ~(PAGE - 1)


@dataclass
class Wait:
    """A system call that cannot finish yet: the core sleeps until retry() gives a result.

    retry() is called when an interrupt arrives (irq), at `deadline` (ME cycle),
    and, when `host` is set, whenever the run loop looks at host file descriptors."""

    what: str
    retry: Callable[[], int | None]
    deadline: int | None = None
    irq: bool = False
    host: bool = False


class Guest(Protocol):
    """What the system calls use of the core."""

    uc: Any  # unicorn.Uc
    brk: int
    brk_base: int
    fault: str | None
    mounts: dict[str, Path]
    guest_path: str  # the program's path as the guest sees it (argv[0])

    def read(self, addr: int, n: int) -> bytes: ...

    def write(self, addr: int, data: bytes) -> None: ...

    def cstring(self, addr: int, limit: int = 4096) -> str: ...

    def now_cycle(self) -> int: ...

    def block(self, wait: Wait) -> None: ...

    def exit(self, code: int) -> None: ...
