"""The router linker: layout YAML -> system image (`npk link`).

A layout (microcode/layouts/*.yaml) names parameters, scratch rings and blocks; each
block is a microcode source assembled with the defines the layout gives it (its input
and output ring, thread count, variant switches) and placed on its MEs.  The linker
also writes the initial memory every block relies on (microcode/README.md §2-§3):
the route trie and next-hop table (npkit.toolchain.router), the buffer descriptors and
their free list, the queue descriptors, and records the scratch ring configuration in
the image's meta (`rings`), which `load_system` applies to a Chip.

Layout format (see microcode/layouts/pipelined.yaml)::

    name: pipelined
    params: {threads: 8, qm: full}          # defaults; -D name=value overrides
    rings:                                   # scratch rings: number, size in longwords
      rx_to_parse: {ring: 0, size: 512}
    exceptions: exceptions                   # the ring carrying exception records
    blocks:
      rx:    {variant: "${io}", variants: {msf: rx/rx.uc, host: external}, mes: [0], out: ...}
      parse: {source: parse/parse.uc, mes: [1], threads: "${threads}",
              in: rx_to_parse, out: parse_to_lookup, defines: {X: 1}}
      qm:    {variant: "${qm}", variants: {full: qm/qm.uc, stub: qm/qm_stub.uc}, ...}

`${name}` in any string is replaced by the parameter; a string that is exactly one
`${name}` takes the parameter's type.  `mes` is a list or {first: F, count: N}.
A define whose value is false is left out; true becomes 1.

Everything a block needs from the system comes through the generated header
`npk_sys.h` (memory map, ring numbers, router configuration, per-port tables as
macros); microcode/include/reasons.h is regenerated from microcode/reasons.yaml.
"""

from __future__ import annotations

import json
import re
import struct
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

ROOT = Path(__file__).resolve().parents[1]
MICROCODE = ROOT / "microcode"
LAYOUTS = MICROCODE / "layouts"
INCLUDE = MICROCODE / "include"
REASONS_H = INCLUDE / "reasons.h"
DEFAULT_ROUTER = ROOT / "examples" / "traffic" / "router.yaml"
DEFAULT_ROUTES = ROOT / "examples" / "traffic" / "routes.txt"


class LinkError(ValueError):
    """An inconsistent layout or a block that does not build; the message says why."""


# ---- the system map (microcode/README.md §2, §3) --------------------------------------


@dataclass(frozen=True)
class SysMap:
    # SRAM channel 1: queue descriptors (16 B each: head, tail, count, 0), free list
    qd_base: int = 0x4000_0000
    freelist_q: int = 0x4000_1000
    # SRAM channel 1: packet descriptors, 32 B each, index = buffer handle
    desc_base: int = 0x4001_0000
    desc_shift: int = 5
    n_bufs: int = 4096
    # DRAM: packet buffers, 2 KB each, frame at offset PKT_PAD (0: rbuf_rd is quadword aligned)
    buf_base: int = 0
    buf_shift: int = 11
    pkt_pad: int = 0
    # scratch: statistics and flow control, then ring storage
    stat_port_base: int = 0x0000  # 16 ports x {rx_pkts, rx_bytes, tx_pkts, tx_bytes}
    stat_drop_base: int = 0x0100  # 256 drop counters by code
    stat_exc_base: int = 0x0500  # 256 exception counters by code
    txdone_base: int = 0x0900  # 16 per-port "sent by tx" counters
    ring_store: int = 0x1000  # ring storage up to the end of scratch (16 KB)
    scratch_bytes: int = 0x4000
    # packet word (README §3.1)
    pw_ttl_le1_bit: int = 27
    pw_src_on_in_subnet_bit: int = 26
    exc_record: int = 1  # record type in exception record LW1 bits 31..24

    def desc_addr(self, index: int) -> int:
        return self.desc_base + (index << self.desc_shift)

    def buf_addr(self, index: int) -> int:
        return self.buf_base + (index << self.buf_shift)

    def qd_addr(self, port: int) -> int:
        return self.qd_base + 16 * port


SYS = SysMap()


def read_counters(chip: Any, ports: int = 16) -> dict[str, Any]:
    """The router's statistics counters in scratch (README §5), by port and by reason
    name: {"ports": [{rx_pkts, rx_bytes, tx_pkts, tx_bytes}...], "drops": {name: n},
    "exceptions": {name: n}} -- nonzero entries only."""
    from npkit.emulator.traffic.reasons import load_reasons

    reasons = load_reasons()
    port_stats = []
    for p in range(ports):
        vals = [chip.read32("scratch", SYS.stat_port_base + 16 * p + 4 * k) for k in range(4)]
        if any(vals):
            port_stats.append(dict(zip(("port", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes"), [p, *vals], strict=True)))
    by_reason = {}
    for kind, table, base in (("drops", reasons.drops, SYS.stat_drop_base), ("exceptions", reasons.exceptions, SYS.stat_exc_base)):
        counts = {r.name: chip.read32("scratch", base + 4 * r.code) for r in table.values()}
        by_reason[kind] = {k: v for k, v in counts.items() if v}
    return {"ports": port_stats, **by_reason}
CAM_NET, CAM_BCAST, CAM_LOCAL = 1, 2, 3
MAX_PORTS = 5  # 3 CAM entries a port in the parse block's 16-entry CAM


# ---- layout ---------------------------------------------------------------------------


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


def _coerce(text: str) -> Any:
    v = yaml.safe_load(text)
    return v if isinstance(v, (int, float, bool, list)) else text


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            return int(str(v), 0)
        except ValueError:
            raise LinkError(f"{where}: expected an integer, got {v!r}") from None
    return v


def _mes(v: Any, where: str) -> list[int]:
    if isinstance(v, dict):
        first, count = (
            _int(v.get("first"), f"{where}.first"),
            _int(v.get("count"), f"{where}.count"),
        )
        return list(range(first, first + count))
    if isinstance(v, list):
        return [_int(x, where) for x in v]
    return [_int(v, where)]


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
    params = dict(raw.get("params") or {})
    for k, v in (overrides or {}).items():
        if k not in params:
            raise LinkError(
                f"{source}: -D {k}: the layout has no such parameter (has: {', '.join(params)})"
            )
        params[k] = v
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
                raise LinkError(f"{where}: ME {me} outside 0..15")
            if me in used_mes:
                raise LinkError(f"{where}: ME {me} is already used by block {used_mes[me]}")
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


# ---- generated headers ---------------------------------------------------------------


def reasons_header() -> str:
    from npkit.emulator.traffic.reasons import load_reasons

    return load_reasons().c_header()


def ensure_reasons_h() -> Path:
    """microcode/include/reasons.h is generated from reasons.yaml; rewrite it if stale."""
    text = reasons_header()
    if not REASONS_H.exists() or REASONS_H.read_text() != text:
        REASONS_H.write_text(text)
    return REASONS_H


def _mac_words(mac: bytes) -> tuple[int, int]:
    return int.from_bytes(mac[0:4], "big"), mac[4] << 8 | mac[5]


def split_macros(numbers: list[int], nports: int) -> list[str]:
    """npk_ring_select(R, K): R = ring number K mod N of the split ring;
    npk_ring_full(R, LABEL): branch to LABEL if ring R (one the ports map to) is full."""
    n = len(numbers)
    out = ["#macro npk_ring_select(R, K)", ".begin", "    .reg rk", "    alu[rk, --, b, K]"]
    if n > 1:
        out += [f"    .while (rk >= {n})", f"        alu[rk, rk, -, {n}]", "    .endw"]
    out += [f"    immed[R, {numbers[0]}]"]
    for k, num in enumerate(numbers[1:], 1):
        out += [f"    .if (rk == {k})", f"        immed[R, {num}]", "    .endif"]
    # compare-and-branch chain: only the matching ring's branch is taken (a structured
    # .if per ring would take a branch for every ring that does not match)
    used = numbers[: min(n, nports)]  # port p uses ring p mod N: never those beyond
    out += [".end", "#endm", "", "#macro npk_ring_full(R, LABEL)"]
    for num in used:
        out += [f"    alu[--, R, -, {num}]", f"    beq[npk_rf_{num}#]"]
    out += ["    br[npk_rf_done#]"]
    for num in used:
        out += [
            f"npk_rf_{num}#:",
            f"    br_inp_state[SCR_RING{num}_STATUS, LABEL]",
            "    br[npk_rf_done#]",
        ]
    out += ["npk_rf_done#:", "#endm", ""]
    return out


def sys_header(config: Any, qm: dict[str, Any], split: list[int] | None = None) -> str:
    """npk_sys.h: memory map, router configuration and the generated table macros."""
    from npkit.toolchain.router.layout import default_layout

    lay = default_layout()
    nports = len(config.ports)
    quanta = qm.get("quanta", 1)
    if not isinstance(quanta, list):
        quanta = [quanta] * nports
    if len(quanta) != nports or not all(isinstance(q, int) and 1 <= q <= 255 for q in quanta):
        raise LinkError(f"qm.quanta: need {nports} integers 1..255 (one a port), got {quanta}")
    d = {
        "NPORTS": nports, "SEND_REDIRECTS": int(bool(config.send_redirects)),
        "QD_BASE": SYS.qd_base, "FREELIST_Q": SYS.freelist_q, "DESC_BASE": SYS.desc_base,
        "DESC_SHIFT": SYS.desc_shift, "N_BUFS": SYS.n_bufs, "BUF_BASE": SYS.buf_base,
        "BUF_SHIFT": SYS.buf_shift, "PKT_PAD": SYS.pkt_pad,
        "STAT_PORT_BASE": SYS.stat_port_base, "STAT_DROP_BASE": SYS.stat_drop_base,
        "STAT_EXC_BASE": SYS.stat_exc_base, "TXDONE_BASE": SYS.txdone_base,
        "PW_TTL_LE1_BIT": SYS.pw_ttl_le1_bit, "PW_SRC_ON_IN_SUBNET_BIT": SYS.pw_src_on_in_subnet_bit,
        "EXC_RECORD": SYS.exc_record, "CAM_NET": CAM_NET, "CAM_BCAST": CAM_BCAST, "CAM_LOCAL": CAM_LOCAL,
        "LPM_CTL_BASE": lay.ctl_base, "LPM_ROOT_BASE": lay.root_base, "LPM_NODE_BASE": lay.node_base,
        "LPM_NH_BASE": lay.nh_base,
        "QM_QLIMIT": int(qm.get("qlimit", 256)), "QM_FIFO_BYTES": int(qm.get("fifo_bytes", 4096)), "QM_TX_WINDOW": int(qm.get("tx_window", 40)),
    }  # fmt: skip
    out = [
        "// npk_sys.h -- generated by `npk link` (npkit.toolchain.link); do not edit.",
        "// The system map and router configuration every block builds against.",
        "#ifndef NPK_SYS_H", "#define NPK_SYS_H", '#include "reasons.h"', "",
    ]  # fmt: skip
    out += [f"#define {k:<24} 0x{v:X}" if v > 9 else f"#define {k:<24} {v}" for k, v in d.items()]
    out.append("")
    # per-port record in local memory: MAC 0-3, MAC 4-5, subnet, netmask
    out += ["#macro npk_port_lm_init()", ".begin", "    .reg lmt lmv"]
    for p in config.ports:
        hi, lo = _mac_words(p.mac)
        out += [f"    immed[lmt, {16 * p.index}]", "    local_csr_wr[ACTIVE_LM_ADDR_0, lmt]",
                "    nop", "    nop", "    nop"]  # fmt: skip
        for k, v in enumerate((hi, lo, p.network, p.netmask)):
            out += [f"    immed[lmv, 0x{v:08X}]", f"    alu[*l$index0[{k}], --, b, lmv]"]
    out += [".end", "#endm", ""]
    # CAM: the router's subnets (network, broadcast) and addresses
    out += ["#macro npk_special_cam_init()", ".begin", "    .reg ct", "    cam_clear"]
    entry = 0
    for p in config.ports:
        for addr, state in ((p.network, CAM_NET), (p.broadcast, CAM_BCAST), (p.address, CAM_LOCAL)):
            out += [f"    immed[ct, 0x{addr:08X}]", f"    cam_write[{entry}, ct, {state}]"]
            entry += 1
    out += [".end", "#endm", ""]
    # queue manager: quantum of port P into REG
    out += ["#macro npk_qm_quantum(REG, P)", f"    immed[REG, {quanta[0]}]"]
    for i, q in enumerate(quanta[1:], 1):
        out += [f"    .if (P == {i})", f"        immed[REG, {q}]", "    .endif"]
    out += ["#endm", ""]
    if split:
        out += split_macros(split, nports)
    out += ["#endif // NPK_SYS_H", ""]
    return "\n".join(out)


# ---- building -------------------------------------------------------------------------


def _router_config(router_config: str | Path | None, routes: str | Path | None) -> tuple[Any, Any]:
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.toolchain.router.loader import build_tables, load_config, load_routes

    cfg_path = Path(router_config) if router_config else DEFAULT_ROUTER
    config = RouterConfig.load(cfg_path)
    if routes is None:
        routes = config.route_file if config.route_file else DEFAULT_ROUTES
    tables = build_tables(load_routes(routes), load_config(cfg_path))
    return config, tables


def _block_defines(layout: Layout, b: Block) -> dict[str, str]:
    d = {"NUM_CONTEXTS": str(b.threads), "BLOCK_" + b.name.upper(): "1",
         "EXC_RING": str(layout.rings[layout.exceptions].number),
         "EXC_RING_STATUS": f"SCR_RING{layout.rings[layout.exceptions].number}_STATUS",
         "NUM_MES": str(len(b.mes)), "FIRST_ME": str(min(b.mes))}  # fmt: skip
    if any(x.source == "tx/tx.uc" for x in layout.blocks.values()):
        d["MSF_TX"] = "1"  # the qm reads the PHY FIFO fill of the MSF's ports
    for key, r in (("IN", b.ring_in), ("OUT", b.ring_out)):
        if r and r in layout.splits:
            d["RING_SPLIT"] = str(len(layout.splits[r]))
            d[f"RING_{key}_SPLIT"] = "1"
            r = layout.splits[r][0]
        if r:
            d[f"RING_{key}"] = str(layout.rings[r].number)
            if key == "OUT":
                d["RING_OUT_STATUS"] = f"SCR_RING{layout.rings[r].number}_STATUS"
    d.update(b.defines)
    return d


def _initial_memory(tables: Any) -> list[tuple[str, int, bytes]]:
    mem: list[tuple[str, int, bytes]] = []
    for start, words in tables.image.runs():
        mem.append(("sram", start, struct.pack(f">{len(words)}I", *words)))
    # descriptors chained into the free list (queue array: linked through LW0)
    n = SYS.n_bufs
    desc = bytearray(n << SYS.desc_shift)
    for i in range(n):
        nxt = SYS.desc_addr(i + 1) if i + 1 < n else 0
        struct.pack_into(">II", desc, i << SYS.desc_shift, nxt, SYS.buf_addr(i))
    mem.append(("sram", SYS.desc_base, bytes(desc)))
    mem.append(
        ("sram", SYS.freelist_q, struct.pack(">4I", SYS.desc_addr(0), SYS.desc_addr(n - 1), n, 0))
    )
    mem.append(("sram", SYS.qd_base, bytes(16 * 16)))
    return mem


HOST_SRC_BASE = 0x8000_0000  # SRAM channel 2: host mailboxes of the stand-in blocks
HOST_SINK_BASE = 0x8010_0000
HOST_EXC_BASE = 0x8020_0000


def _host_blocks(lay: Layout, tx_confirm: bool = True) -> list[tuple[str, Block]]:
    """Stand-ins for external blocks (phase 1: rx, tx, the XScale's exception reader):
    microcode/host/host_src.uc feeds a ring from an SRAM mailbox, host_sink.uc logs a
    ring into SRAM.  The exception sink goes on the highest ME nobody uses."""
    out: list[tuple[str, Block]] = []
    used = {me for b in lay.blocks.values() for me in b.mes}
    for b in lay.blocks.values():
        if b.source is not None or not b.mes:
            continue
        if b.ring_out:
            out.append(("host/host_src.uc", Block(f"host_{b.name}", "host/host_src.uc", b.mes[:1], 4, None,
                                                  b.ring_out, {"HOST_BASE": hex(HOST_SRC_BASE)})))  # fmt: skip
        elif b.ring_in:
            out.append(("host/host_sink.uc", Block(f"host_{b.name}", "host/host_sink.uc", b.mes[:1], 8, b.ring_in,
                                                   None, {"HOST_BASE": hex(HOST_SINK_BASE), **({"SINK_TXDONE": "1"} if tx_confirm else {})})))  # fmt: skip
    free = [me for me in range(16) if me not in used]
    if not free:
        raise LinkError("no ME left for the exception ring's host reader")
    out.append(("host/host_sink.uc", Block("host_exceptions", "host/host_sink.uc", [free[-1]], 8, lay.exceptions,
                                           None, {"HOST_BASE": hex(HOST_EXC_BASE)})))  # fmt: skip
    return out


def link(layout: str | Path | dict[str, Any], params: dict[str, Any] | None = None,
         routes: str | Path | None = None, router_config: str | Path | None = None,
         config: str = "ixp2800", host_stubs: bool = False, tx_confirm: bool = True) -> Any:  # fmt: skip
    """Build the system image for a layout.  Returns npkit.toolchain.image.Image; its
    meta holds the layout graph, the ring table and the system map.  With host_stubs,
    external blocks get the stand-ins of `_host_blocks` so the host can drive rings."""
    from npkit.asm.assembler import assemble
    from npkit.asm.errors import AsmError
    from npkit.toolchain.image import Image

    lay = load_layout(layout, params)
    rcfg, tables = _router_config(router_config, routes)
    if len(rcfg.ports) > MAX_PORTS:
        raise LinkError(f"{len(rcfg.ports)} ports: the parse block's CAM holds the special "
                        f"addresses of at most {MAX_PORTS} ports")  # fmt: skip
    for b in lay.blocks.values():
        if b.source and "fastpath" in b.source and "LOOKUP_CAM_CACHE" in b.defines:
            raise LinkError(f"block {b.name}: LOOKUP_CAM_CACHE needs the CAM that the fast path's "
                            "parse step already uses for the router's own addresses")  # fmt: skip
    ensure_reasons_h()
    programs = []
    with tempfile.TemporaryDirectory(prefix="npk-link-") as tmp:
        split = [lay.rings[m].number for ms in lay.splits.values() for m in ms]
        (Path(tmp) / "npk_sys.h").write_text(sys_header(rcfg, lay.qm, split))
        todo = [b for b in lay.blocks.values() if b.source is not None]
        if host_stubs:
            todo += [b for _, b in _host_blocks(lay, tx_confirm)]
        for b in todo:
            assert b.source is not None
            src = MICROCODE / b.source
            incs = [tmp, str(INCLUDE), str(src.parent)] + [
                str(MICROCODE / x) for x in ("parse", "lookup", "hdr_format")
            ]
            try:
                asm = assemble(src, include_dirs=incs, defines=_block_defines(lay, b), ctx_mode=b.threads,
                               name=b.name)  # fmt: skip
            except AsmError as e:
                raise LinkError(f"block {b.name} ({b.source}): {e}") from None
            prog = asm.program
            prog.mes = list(b.mes)
            programs.append(prog)
    if not programs:
        raise LinkError(f"{lay.source}: no block has microcode")
    programs[0].init_mem.extend(_initial_memory(tables))
    meta = {
        "layout": lay.name, "params": lay.params, "graph": lay.graph(),
        "rings": {r.name: {"ring": r.number, "base": r.base, "size": r.size,
                           "margin": max(2, 2 * sum(lay.blocks[p].threads * len(lay.blocks[p].mes)
                                                    for p in r.producers if p in lay.blocks)),
                           "producers": r.producers, "consumers": r.consumers} for r in lay.rings.values()},
        "exceptions": lay.exceptions,
        "sysmap": {k: getattr(SYS, k) for k in SYS.__dataclass_fields__},
        "router_config": str(rcfg.source or ""),
    }  # fmt: skip
    return Image(programs=programs, config=config, meta=meta)


def load_system(chip: Any, image: Any, enable: bool = True) -> None:
    """Put a linked image on a Chip: control stores, initial memory, scratch rings,
    signals; then enable every program's contexts (8-context mode: all eight,
    4-context mode: 0, 2, 4, 6)."""
    for r in image.meta.get("rings", {}).values():
        chip.scratch_ring(r["ring"], r["base"], r["size"], r["margin"])
    for prog in image.programs:
        for space, addr, data in prog.init_mem:
            chip.mem_write(space, addr, data)
    for prog in image.programs:
        for me in prog.mes:
            chip.load(me, prog.words, prog.ctx_mode)
            for reg, ctx, value in prog.init_regs:
                for c in [ctx] if ctx is not None else range(8):
                    chip.set_reg(me, reg, value, ctx=c)
            for sig in prog.set_sigs:
                chip.set_signal(me, sig)
    if enable:
        for prog in image.programs:
            for me in prog.mes:
                if prog.name.startswith("host_"):
                    chip.enable(me, 1)
                else:
                    chip.enable(me, 0xFF if prog.ctx_mode == 8 else 0x55)


# ---- command line ---------------------------------------------------------------------


@click.command("link")
@click.argument("layout")
@click.option(
    "-D", "defines", multiple=True, metavar="PARAM=VAL", help="override a layout parameter"
)
@click.option("--routes", type=click.Path(exists=True, dir_okay=False), help="route file")
@click.option("--router-config", type=click.Path(exists=True, dir_okay=False), help="router YAML")
@click.option(
    "-o", "output", required=True, type=click.Path(dir_okay=False), help="system image (ELF)"
)
@click.option("--json", "as_json", is_flag=True, help="print the layout graph as JSON")
def link_cmd(layout: str, defines: tuple[str, ...], routes: str | None, router_config: str | None,
             output: str, as_json: bool) -> None:  # fmt: skip
    """Link the router blocks of LAYOUT (a name in microcode/layouts or a YAML file)."""
    from npkit.toolchain.image import write_image

    params: dict[str, Any] = {}
    for d in defines:
        k, sep, v = d.partition("=")
        if not sep:
            raise click.UsageError(f"-D {d}: expected PARAM=VALUE")
        params[k.strip()] = _coerce(v.strip())
    try:
        image = link(layout, params, routes, router_config)
    except LinkError as e:
        click.echo(f"npk link: error: {e}", err=True)
        sys.exit(1)
    write_image(output, image)
    if as_json:
        click.echo(json.dumps(image.meta["graph"], indent=2))
    else:
        for p in image.programs:
            click.echo(
                f"{p.name:<12} MEs {','.join(map(str, p.mes)):<12} {p.ctx_mode} ctx  {len(p.words)} words"
            )
        click.echo(f"wrote {output}")


# ---- host harness (tests, demo): drive rings through the host stand-ins ----------------


class Harness:
    """A linked system on a Chip, with the host stand-ins of `_host_blocks`.

    `packet(frame, in_port)` takes a buffer off the free list, writes the frame into
    DRAM at offset PKT_PAD and its descriptor (README §2), and returns its packet word;
    `send(w0, w1)` queues a message on the input ring of the layout's first block;
    `outputs()` / `exceptions()` read what the sinks logged; `drops()` reads the drop
    counters; `frame(pw)` reads a buffer's frame back."""

    def __init__(self, layout: str | Path | dict[str, Any], params: dict[str, Any] | None = None,
                 routes: str | Path | None = None, router_config: str | Path | None = None,
                 chip_config: str = "ixp2800", tx_confirm: bool = True) -> None:  # fmt: skip
        from npkit.emulator.binding import Chip

        params = dict(params or {})
        if not isinstance(layout, dict) and "io" in load_layout(layout).params:
            params.setdefault("io", "host")  # rx/tx stand-ins instead of the MSF blocks
        self.image = link(
            layout,
            params,
            routes,
            router_config,
            chip_config,
            host_stubs=True,
            tx_confirm=tx_confirm,
        )
        self.chip = Chip(chip_config)
        load_system(self.chip, self.image)
        self.sent = 0
        self.lengths: dict[int, int] = {}

    # memory helpers
    def _r(self, addr: int, n: int = 1) -> list[int]:
        return list(struct.unpack(f">{n}I", self.chip.mem_read("sram", addr, 4 * n)))

    def _w(self, addr: int, *words: int) -> None:
        self.chip.mem_write("sram", addr, struct.pack(f">{len(words)}I", *words))

    def alloc(self) -> int:
        """Pop a buffer index off the free list (as rx will)."""
        head, tail, count, _ = self._r(SYS.freelist_q, 4)
        if not count or not head:
            raise RuntimeError("free list empty")
        nxt = self._r(head)[0]
        self._w(SYS.freelist_q, nxt if count > 1 else 0, tail if count > 1 else 0, count - 1)
        return (head - SYS.desc_base) >> SYS.desc_shift

    def free_count(self) -> int:
        return self._r(SYS.freelist_q + 8)[0]

    def packet(self, frame: bytes, in_port: int) -> int:
        i = self.alloc()
        self.chip.mem_write(
            "dram", SYS.buf_addr(i), bytes(SYS.pkt_pad) + frame + bytes(-(len(frame) + 2) % 8)
        )
        self._w(
            SYS.desc_addr(i) + 4,
            SYS.buf_addr(i),
            len(frame) << 16 | SYS.pkt_pad,
            in_port << 24,
            0,
            0,
        )
        self.lengths[i] = len(frame)
        return 0x8000_0000 | (in_port & 7) << 28 | i

    def send(self, w0: int, w1: int) -> None:
        self._w(HOST_SRC_BASE + 16 + 8 * self.sent, w0, w1)
        self.sent += 1
        self._w(HOST_SRC_BASE, self.sent)

    def inject(self, frame: bytes, in_port: int) -> int:
        """A received frame as rx hands it on: (packet word, length)."""
        pw = self.packet(frame, in_port)
        self.send(pw, len(frame))
        return pw

    def run(self, cycles: int) -> None:
        self.chip.run(cycles)

    def _log(self, base: int) -> list[tuple[int, int]]:
        n = self._r(base)[0]
        if not n:
            return []
        w = self._r(base + 16, 2 * n)
        return [(w[2 * k], w[2 * k + 1]) for k in range(n)]

    def outputs(self) -> list[tuple[int, int]]:
        return self._log(HOST_SINK_BASE)

    def exceptions(self) -> list[tuple[int, int]]:
        return self._log(HOST_EXC_BASE)

    def frame(self, pw: int, length: int | None = None) -> bytes:
        i = pw & 0xFFFF
        n = length if length is not None else self._r(SYS.desc_addr(i) + 8)[0] >> 16
        return self.chip.mem_read("dram", SYS.buf_addr(i) + SYS.pkt_pad, n)

    def counter(self, addr: int) -> int:
        return self.chip.read32("scratch", addr)

    def drops(self) -> dict[int, int]:
        raw = self.chip.mem_read("scratch", SYS.stat_drop_base, 1024)
        return {c: v for c, v in enumerate(struct.unpack(">256I", raw)) if v}

    def exception_counts(self) -> dict[int, int]:
        raw = self.chip.mem_read("scratch", SYS.stat_exc_base, 1024)
        return {c: v for c, v in enumerate(struct.unpack(">256I", raw)) if v}
