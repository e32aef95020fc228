"""Router layouts (microcode/layouts/*.yaml): read, substitute parameters, check.

A layout names parameters, scratch rings and blocks; each block is a microcode source
assembled with the defines the layout gives it (its input and output ring, thread count,
variant switches) and placed on its MEs::

    name: pipelined
    params: {threads: 8, qm: full}          # defaults; -D name=value overrides
    rings:                                   # scratch rings: number, size in longwords
      rx_to_parse: {ring: 0, size: 512}
    exceptions: exceptions                   # the ring carrying exception records
    qm: {quanta: 1, qlimit: 256, tx_window: 40}
    blocks:
      rx:    {variant: "${io}", variants: {msf: rx/rx.uc, host: external}, mes: [0], out: ...}
      parse: {source: parse/parse.uc, mes: [1], threads: "${threads}",
              in: rx_to_parse, out: parse_to_lookup, defines: {X: 1}}
      qm:    {variant: "${qm}", variants: {full: qm/qm.uc, stub: qm/qm_stub.uc}, ...}

`${name}` in any string is replaced by the parameter; a string that is exactly one
`${name}` takes the parameter's type.  `mes` is a list or {first: F, count: N}.
A define whose value is false is left out; true becomes 1.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from npkit.emulator.me_names import me_name

from .paths import LAYOUTS, MICROCODE
from .sysmap import SYS


class LinkError(ValueError):
    """An inconsistent layout or a block that does not build; the message says why."""


@dataclass
class Ring:
    name: str
    number: int
    size: int
    base: int = 0
    producers: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)


@dataclass
class Block:
    name: str
    source: str | None  # None = external (rx/tx before phase 2, the XScale, the host)
    mes: list[int]
    threads: int
    ring_in: str | None
    ring_out: str | None
    defines: dict[str, str]


@dataclass
class Layout:
    name: str
    params: dict[str, Any]
    rings: dict[str, Ring]
    blocks: dict[str, Block]
    exceptions: str
    qm: dict[str, Any]
    source: str
    splits: dict[str, list[str]] = field(default_factory=dict)

    def graph(self) -> dict[str, Any]:
        """Blocks and ring edges, for `npk graph` and the debugger."""
        edges = []
        for r in self.rings.values():
            for p in r.producers or ["?"]:
                for c in r.consumers or ["?"]:
                    edges.append({"from": p, "to": c, "ring": r.name, "number": r.number})
        return {
            "name": self.name,
            "blocks": {b.name: {"mes": b.mes, "threads": b.threads, "external": b.source is None}
                       for b in self.blocks.values()},
            "edges": edges,
        }  # fmt: skip


_PARAM = re.compile(r"\$\{(\w+)\}")


def _subst(value: Any, params: dict[str, Any], where: str) -> Any:
    if isinstance(value, str):
        m = _PARAM.fullmatch(value.strip())
        if m:
            if m[1] not in params:
                raise LinkError(f"{where}: unknown parameter ${{{m[1]}}}")
            return params[m[1]]

        def rep(mm: re.Match[str]) -> str:
            if mm[1] not in params:
                raise LinkError(f"{where}: unknown parameter ${{{mm[1]}}}")
            return str(params[mm[1]])

        return _PARAM.sub(rep, value)
    if isinstance(value, list):
        return [_subst(v, params, where) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, params, f"{where}.{k}") for k, v in value.items()}
    return value


def coerce(text: str) -> Any:
    """A -D value as YAML reads it (4, 0x10, true, [1, 2]); anything else stays text."""
    try:
        v = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return v if isinstance(v, (int, float, bool, list)) else text


def parse_defines(defines: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """-D NAME=VALUE options, one parser for every command that takes them.  NAME is a
    layout parameter (`threads`), or a dotted path into the layout (`qm.qlimit`,
    `qm.quanta`, `parse.threads`, `lookup.defines.LOOKUP_CAM_CACHE`; a path that starts
    with a block name is under `blocks`)."""
    out: dict[str, Any] = {}
    for d in defines:
        k, sep, v = d.partition("=")
        if not sep or not k.strip():
            raise LinkError(f"-D {d}: expected NAME=VALUE")
        out[k.strip()] = coerce(v.strip())
    return out


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any], source: str) -> dict[str, Any]:
    """The layout with -D overrides applied: plain names set parameters, dotted names set
    the value at that path (which must exist, but for a block's new `defines`)."""
    raw = copy.deepcopy(raw)
    if not isinstance(raw.get("params"), dict):
        raw["params"] = {}
    params = raw["params"]
    for key, value in overrides.items():
        if "." not in key:
            if key not in params:
                raise LinkError(f"{source}: -D {key}: the layout has no such parameter (has: {', '.join(params)}; "
                                "dotted names reach the rest, e.g. qm.qlimit, parse.threads)")  # fmt: skip
            params[key] = value
            continue
        path = key.split(".")
        if path[0] not in raw and path[0] in (raw.get("blocks") or {}):
            path = ["blocks", *path]
        node: Any = raw
        for i, part in enumerate(path[:-1]):
            if isinstance(node, dict) and part == "defines" and part not in node:
                node[part] = {}
            if not isinstance(node, dict) or not isinstance(node.get(part), dict):
                raise LinkError(f"{source}: -D {key}: the layout has no mapping {'.'.join(path[: i + 1])}")
            node = node[part]
        if path[-1] not in node and path[-2] != "defines":
            raise LinkError(f"{source}: -D {key}: {'.'.join(path[:-1])} has no key {path[-1]!r} "
                            f"(has: {', '.join(map(str, node))})")  # fmt: skip
        node[path[-1]] = value
    return raw


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            return int(str(v), 0)
        except ValueError:
            raise LinkError(f"{where}: expected an integer, got {v!r}") from None
    return v


def _me(v: Any, where: str) -> int:
    """An ME of a layout: an int is the flat index (0-15); a string may also name it the
    hardware way, "0x10" or "1:0" (IXP2800 numbering, npkit.emulator.me_names)."""
    if isinstance(v, str):
        from npkit.emulator.me_names import MeNameError, parse_me

        try:
            return parse_me(v, 8, 16)
        except MeNameError as e:
            raise LinkError(f"{where}: {e}") from None
    return _int(v, where)


def _mes(v: Any, where: str) -> list[int]:
    if isinstance(v, dict):
        first, count = (
            _int(v.get("first"), f"{where}.first"),
            _int(v.get("count"), f"{where}.count"),
        )
        return list(range(first, first + count))
    if isinstance(v, list):
        return [_me(x, where) for x in v]
    return [_me(v, where)]


def load_layout(
    path: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None
) -> Layout:
    """Read and check a layout.  `path` may be a layout name ("pipelined"), a file, or
    an already-parsed mapping (tests).  Raises LinkError with the reason."""
    if isinstance(path, dict):
        raw, source = path, "<layout>"
    else:
        p = Path(path)
        if not p.exists() and (LAYOUTS / f"{path}.yaml").exists():
            p = LAYOUTS / f"{path}.yaml"
        if not p.exists():
            raise LinkError(
                f"layout {path}: no such file (layouts: {', '.join(sorted(x.stem for x in LAYOUTS.glob('*.yaml')))})"
            )
        raw, source = yaml.safe_load(p.read_text()), str(p)
    if not isinstance(raw, dict):
        raise LinkError(f"{source}: a layout is a mapping")
    for key in ("rings", "blocks", "exceptions"):
        if key not in raw:
            raise LinkError(f"{source}: missing '{key}'")
    raw = _apply_overrides(raw, overrides or {}, source)
    params = dict(raw.get("params") or {})
    # parameters may refer to parameters given before them
    for k in list(params):
        params[k] = _subst(params[k], params, f"{source}: params.{k}")
    raw = _subst({k: v for k, v in raw.items() if k != "params"}, params, source)

    rings: dict[str, Ring] = {}
    numbers: dict[int, str] = {}
    splits: dict[str, list[str]] = {}
    for name, spec in (raw["rings"] or {}).items():
        if not isinstance(spec, dict):
            raise LinkError(f"{source}: ring {name}: expected {{ring: N, size: WORDS}}")
        size = _int(spec.get("size", 512), f"{source}: ring {name}.size")
        if size not in (128, 256, 512, 1024):
            raise LinkError(
                f"{source}: ring {name}: size {size} is not 128, 256, 512 or 1024 longwords"
            )
        # a split ring: `split: N` rings taken from the list `ring`, one per ME of its
        # consumer; its producer steers input port p to ring p mod N (README §3.4)
        if "split" in spec:
            n = _int(spec["split"], f"{source}: ring {name}.split")
            nums = spec.get("ring")
            if not isinstance(nums, list) or not 1 <= n <= len(nums):
                raise LinkError(
                    f"{source}: ring {name}: split {n} needs a list of at least {n} ring numbers"
                )
            members = [
                (f"{name}.{k}", _int(nums[k], f"{source}: ring {name}.ring")) for k in range(n)
            ]
            splits[name] = [m for m, _ in members]
        else:
            members = [(name, _int(spec.get("ring"), f"{source}: ring {name}.ring"))]
        for rname, num in members:
            if not 0 <= num <= 15:
                raise LinkError(f"{source}: ring {rname}: scratch ring number {num} outside 0..15")
            if num in numbers:
                raise LinkError(
                    f"{source}: rings {numbers[num]} and {rname} both use scratch ring {num}"
                )
            numbers[num] = rname
            rings[rname] = Ring(rname, num, size)
    if len(splits) > 1:
        raise LinkError(f"{source}: at most one split ring ({', '.join(splits)})")

    blocks: dict[str, Block] = {}
    used_mes: dict[int, str] = {}
    for name, spec in (raw["blocks"] or {}).items():
        where = f"{source}: block {name}"
        if not isinstance(spec, dict):
            raise LinkError(f"{where}: expected a mapping")
        external = bool(spec.get("external", False))
        src = None
        if "variants" in spec:
            variant = str(spec.get("variant"))
            if variant not in spec["variants"]:
                raise LinkError(
                    f"{where}: variant {variant!r} is not one of {', '.join(spec['variants'])}"
                )
            # a variant named "external" leaves the block to the host (stand-ins)
            external = external or str(spec["variants"][variant]) == "external"
        if not external:
            if "variants" in spec:
                src = str(spec["variants"][str(spec.get("variant"))])
            elif "source" in spec:
                src = str(spec["source"])
            else:
                raise LinkError(
                    f"{where}: needs 'source' (or 'variants' + 'variant', or 'external: true')"
                )
            if not (MICROCODE / src).exists():
                raise LinkError(f"{where}: source {src} not found under microcode/")
        mes = _mes(spec.get("mes", []), f"{where}.mes")
        if not external and not mes:
            raise LinkError(f"{where}: no MEs")
        for me in mes:
            if not 0 <= me < 16:
                raise LinkError(f"{where}: ME {me} outside 0..15 (flat index; or name it 0x00-0x07, 0x10-0x17)")
            if me in used_mes:
                raise LinkError(f"{where}: ME {me_name(me, 8)} is already used by block {used_mes[me]}")
            used_mes[me] = name
        threads = _int(spec.get("threads", 8), f"{where}.threads")
        if threads not in (4, 8):
            raise LinkError(f"{where}: threads must be 4 or 8, got {threads}")
        defines: dict[str, str] = {}
        for k, v in (spec.get("defines") or {}).items():
            if v is False or v is None or v == 0 and isinstance(v, bool):
                continue
            defines[str(k)] = "1" if v is True else str(v)
        for key in ("in", "out"):
            r = spec.get(key)
            if r is not None and r not in rings and r not in splits:
                raise LinkError(f"{where}: {key} ring {r!r} is not declared under rings")
        b = Block(name, src, mes, threads, spec.get("in"), spec.get("out"), defines)
        blocks[name] = b
        if b.ring_in:
            members = splits.get(b.ring_in, [b.ring_in])
            if len(members) > 1 and not external and len(mes) != len(members):
                raise LinkError(f"{where}: reads split ring {b.ring_in} of {len(members)} rings "
                                f"but runs on {len(mes)} MEs")  # fmt: skip
            for m in members:
                rings[m].consumers.append(name)
        if b.ring_out:
            for m in splits.get(b.ring_out, [b.ring_out]):
                rings[m].producers.append(name)
    exc = raw["exceptions"]
    if exc not in rings:
        raise LinkError(f"{source}: exceptions ring {exc!r} is not declared under rings")
    for b in blocks.values():
        if b.source is not None:
            rings[exc].producers.append(b.name)
    rings[exc].consumers.append("xscale")
    for r in rings.values():
        if r.name != exc and (len(r.consumers) != 1 or not r.producers):
            raise LinkError(f"{source}: ring {r.name} needs producers and exactly one consumer "
                            f"(producers: {r.producers or 'none'}, consumers: {r.consumers or 'none'})")  # fmt: skip
        if r.number > 11 and any(blocks[p].source for p in r.producers if p in blocks):
            raise LinkError(f"{source}: ring {r.name}: microcode puts to it, but only scratch rings "
                            "0..11 have a full flag (SCR_RINGn_STATUS)")  # fmt: skip
    # ring storage
    addr = SYS.ring_store
    for r in sorted(rings.values(), key=lambda r: r.number):
        addr = (addr + r.size * 4 - 1) // (r.size * 4) * (r.size * 4)
        r.base = addr
        addr += r.size * 4
    if addr > SYS.scratch_bytes:
        raise LinkError(f"{source}: the rings need {addr - SYS.ring_store} bytes of scratch, "
                        f"{SYS.scratch_bytes - SYS.ring_store} are free")  # fmt: skip
    qm = dict(raw.get("qm") or {})
    lay = Layout(str(raw.get("name", Path(source).stem)), params, rings, blocks, exc, qm, source)
    lay.splits = splits
    return lay

