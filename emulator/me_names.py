"""Microengine numbers: the hardware's cluster numbering and the emulator's flat index.

The hardware numbers microengines by cluster (IXP2800 HRM p.35 Table 3): cluster c, ME m
within it is ME number `c << 4 | m`, so 0x00-0x07 and 0x10-0x17 on the IXP2800 (eight
per cluster) and 0x00-0x03, 0x10-0x13 on the IXP2400 (four per cluster; Linux
arch/arm/mach-ixp2000/uengine.c enables MEs 0x000f000f there and 0x00ff00ff on the
IXP2800).  That is the number ACTIVE_CTX_STS[7:3] reports and the one Intel's tools
print (also as `cluster:ME`, e.g. `1:0`).

Inside, the emulator (C arrays, the C API, images, layouts) numbers MEs flat:
index = c * per_cluster + m, 0..num_me-1, which is also the next-neighbour order.  This
module converts at the boundary: everything a user types goes through `parse_me`, and
everything printed goes through `me_name`.

A user names an ME as
    0x10   the hardware number (hexadecimal, as the HRM writes it),
    1:0    cluster:ME, as Intel's tools write it,
    8      the flat index (decimal; an alias kept for scripts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class MeNameError(ValueError):
    """A microengine name that does not parse or names no ME of this chip."""


def per_cluster(config: Mapping[str, Any]) -> int:
    """MEs per cluster of a chip config: `me_per_cluster`, else half of num_me rounded up
    to a power of two (8 for 16 MEs, 4 for 8)."""
    k = int(config.get("me_per_cluster") or 0)
    if k:
        return k
    n = max(1, (int(config["num_me"]) + 1) // 2)
    return 1 << (n - 1).bit_length()


def me_number(index: int, k: int) -> int:
    """Hardware ME number of flat index `index` with `k` MEs per cluster."""
    return (index // k) << 4 | index % k


def me_name(index: int, k: int) -> str:
    """'0x10' -- how a microengine is printed."""
    return f"0x{me_number(index, k):02x}"


def _index(cluster: int, me: int, k: int, num_me: int, text: str) -> int:
    if not 0 <= cluster <= 1 or not 0 <= me < k or cluster * k + me >= num_me:
        raise MeNameError(f"ME {text!r} does not exist on this chip ({valid_names(k, num_me)})")
    return cluster * k + me


def valid_names(k: int, num_me: int) -> str:
    """'MEs 0x00-0x07, 0x10-0x17, or flat 0-15'."""
    clusters = [[me_name(i, k) for i in range(num_me) if i // k == c] for c in (0, 1)]
    parts = [f"{c[0]}-{c[-1]}" if len(c) > 1 else c[0] for c in clusters if c]
    return "MEs " + ", ".join(parts) + f", or flat 0-{num_me - 1}"


def parse_me(text: str, k: int, num_me: int) -> int:
    """Flat index of the ME named by `text` ('0x10', '1:0' or '8')."""
    t = text.strip().lower()
    try:
        if ":" in t:
            c, m = t.split(":", 1)
            cluster, me = int(c, 0), int(m, 0)
        elif t.startswith("0x"):
            hw = int(t, 16)
            cluster, me = hw >> 4, hw & 0xF
        else:
            cluster, me = divmod(int(t, 10), k)
    except ValueError:
        raise MeNameError(f"ME {text!r}: expected a hardware number (0x10), cluster:ME (1:0) "
                          "or a flat index (8)") from None  # fmt: skip
    return _index(cluster, me, k, num_me, text)


def parse_me_list(text: str, k: int, num_me: int) -> list[int]:
    """'0x00-0x03,0x10' / '1:0-1:3' / '0,2-4' -> flat indices; a range covers every ME
    between its ends in flat (next-neighbour) order."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.strip() or (sep and not hi.strip()):
            raise MeNameError(f"ME {part!r}: expected an ME (0x10, 1:0, 8) or a range FIRST-LAST (0x10-0x13)")
        a = parse_me(lo, k, num_me)
        b = parse_me(hi, k, num_me) if sep else a
        if b < a:
            raise MeNameError(f"ME range {part!r} runs backwards")
        again = sorted(set(out) & set(range(a, b + 1)))
        if again:  # one ME twice would load one program over itself
            raise MeNameError(f"ME list {text!r} names ME {me_name(again[0], k)} twice")
        out.extend(range(a, b + 1))
    if not out:
        raise MeNameError(f"ME list {text!r} names no ME")
    return out


def format_me_list(mes: list[int], k: int) -> str:
    """Flat indices as a user writes them (parse_me_list reads it back): '0x00-0x03,0x10'.
    Three or more MEs in a row within one cluster are a range; a range never crosses a
    cluster, so 0x07 and 0x10 stay two names."""
    out: list[str] = []
    run: list[int] = []
    for me in sorted(set(mes)):
        if run and (me != run[-1] + 1 or me // k != run[-1] // k):
            out.append(_run_text(run, k))
            run = []
        run.append(me)
    if run:
        out.append(_run_text(run, k))
    return ",".join(out)


def _run_text(run: list[int], k: int) -> str:
    if len(run) >= 3:
        return f"{me_name(run[0], k)}-{me_name(run[-1], k)}"
    return ",".join(me_name(me, k) for me in run)
