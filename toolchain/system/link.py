"""The router linker: layout -> system image (`npk link`).

Each block of the layout (npkit.toolchain.system.layout) is assembled with the defines
the layout gives it and placed on its MEs.  The linker also writes the initial memory
every block relies on (microcode/README.md §2-§3): the route trie and next-hop table
(npkit.toolchain.router), the buffer descriptors and their free list, the queue
descriptors; and records the scratch rings in the image's meta (`rings`), which the one
loader (npkit.emulator.loader.load_image) configures on a Chip.

Everything a block needs from the system comes through the generated header
`npk_sys.h` (memory map, ring numbers, router configuration, per-port tables as
macros); microcode/include/reasons.h is regenerated from microcode/reasons.yaml.
"""
from __future__ import annotations

import json
import struct
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.emulator.tcam import ENTRY_BYTES as TCAM_ENTRY_BYTES
from npkit.emulator.tcam import WINDOW_BYTES as TCAM_WINDOW
from npkit.emulator.tcam import tcam_base, tcam_defines

from .layout import Block, Layout, LinkError, load_layout
from .paths import DEFAULT_ROUTER, DEFAULT_ROUTES, INCLUDE, LAYOUTS, MICROCODE, REASONS_H
from .sched import sched_header
from .sysmap import (
    CAM_BCAST,
    CAM_LOCAL,
    CAM_NET,
    CP_STATS_BASE,
    HOST_EXC_BASE,
    HOST_SINK_BASE,
    HOST_SRC_BASE,
    MAX_PORTS,
    SYS,
)

if TYPE_CHECKING:
    from npkit.asm.image import Program

    from .app import App

# ---- generated headers ---------------------------------------------------------------


def reasons_header() -> str:
    from npkit.emulator.traffic.reasons import load_reasons

    return load_reasons().c_header()


def ensure_reasons_h() -> Path:
    """microcode/include/reasons.h is generated from reasons.yaml; rewrite it if stale.
    A reasons file the schema refuses is a LinkError at its line."""
    from npkit.emulator.traffic.reasons import ReasonError

    try:
        text = reasons_header()
    except ReasonError as e:
        raise LinkError(str(e)) from None
    if not REASONS_H.exists() or REASONS_H.read_text() != text:
        REASONS_H.write_text(text)
    return REASONS_H


def _mac_words(mac: bytes) -> tuple[int, int]:
    return int.from_bytes(mac[0:4], "big"), mac[4] << 8 | mac[5]


def _naf(n: int) -> list[tuple[int, int]]:
    """n's non-adjacent form, highest digit first: (bit, +1 or -1) with no two digits
    adjacent, the fewest nonzero digits of any signed-binary form."""
    digits = []
    b = 0
    while n:
        if n & 1:
            d = 2 - (n & 3)  # +1 when n = 1 mod 4, -1 when n = 3 mod 4
            digits.append((b, d))
            n -= d
        n >>= 1
        b += 1
    return digits[::-1]


# the longest compare-and-branch chain npk_ring_full uses: every image measured so far
# was built with the chain (the harness reference's parallel layout has four rings); a
# longer split ring gets a search tree, since rx tests its ring at the edge of its cycle
# budget (nine rings: 20 cycles on average through the chain, 18.8 through the tree)
RING_FULL_CHAIN_MAX = 8


def _ring_full_test(numbers: list[int]) -> list[str]:
    """npk_ring_full's body: branch to LABEL if ring R (one of `numbers`) is full.  Up to
    RING_FULL_CHAIN_MAX rings a compare-and-branch chain, where only the matching ring's
    branch is taken (a structured .if per ring would take a branch for every ring that
    does not match); beyond, a binary search over the sorted ring numbers, which tests a
    ring in log2(N) compares, not up to N."""
    if len(numbers) > RING_FULL_CHAIN_MAX:
        return _ring_full_tree(sorted(numbers))
    return _ring_full_chain(numbers)


def _ring_full_chain(numbers: list[int]) -> list[str]:
    out = []
    for num in numbers:
        out += [f"    alu[--, R, -, {num}]", f"    beq[npk_rf_{num}#]"]
    out += ["    br[npk_rf_done#]"]
    for num in numbers:
        out += [f"npk_rf_{num}#:", f"    br_inp_state[SCR_RING{num}_STATUS, LABEL]", "    br[npk_rf_done#]"]
    return out


def _ring_full_tree(numbers: list[int]) -> list[str]:
    if len(numbers) == 1:
        return [f"    br_inp_state[SCR_RING{numbers[0]}_STATUS, LABEL]", "    br[npk_rf_done#]"]
    low, high = numbers[: len(numbers) // 2], numbers[len(numbers) // 2 :]
    return [f"    alu[--, R, -, {high[0]}]", f"    bge[npk_rf_ge{high[0]}#]", *_ring_full_tree(low),
            f"npk_rf_ge{high[0]}#:", *_ring_full_tree(high)]  # fmt: skip


def split_macros(numbers: list[int]) -> list[str]:
    """Macros of a split ring (microcode/README.md §3.4), numbers = its N scratch rings:
    npk_ring_select(R, K): R = ring number K mod N (pool ME k reads ring k);
    npk_ring_hash(R, H): R = the ring of the 16-bit flow hash in bits 31..16 of H, ring
    (hash * N) >> 16, so that every ring gets an equal share of the hash space (rx steers
    each packet by its flow);
    npk_ring_full(R, LABEL): branch to LABEL if ring R (any of the N) is full."""
    n = len(numbers)
    contiguous = numbers == list(range(numbers[0], numbers[0] + n))

    def choose(reg: str) -> list[str]:
        """R = numbers[reg] (reg < n)."""
        if n == 1:
            return [f"    immed[R, {numbers[0]}]"]
        if contiguous:
            return [f"    alu[R, {reg}, +, {numbers[0]}]"]
        out = [f"    immed[R, {numbers[0]}]"]
        for k, num in enumerate(numbers[1:], 1):
            out += [f"    .if ({reg} == {k})", f"        immed[R, {num}]", "    .endif"]
        return out

    out = ["#macro npk_ring_select(R, K)", ".begin", "    .reg rk", "    alu[rk, --, b, K]"]
    if n > 1:
        out += [f"    .while (rk >= {n})", f"        alu[rk, rk, -, {n}]", "    .endw"]
    out += [*choose("rk"), ".end", "#endm", ""]
    # the hash's share (hash * N) >> 16, N a link-time constant: a shift when N is a power of
    # two, else shift-and-add
    out += ["#macro npk_ring_hash(R, H)", ".begin", "    .reg hk"]
    if n == 1:
        out += [f"    immed[R, {numbers[0]}]"]
    else:
        if n & (n - 1) == 0:
            out += [f"    alu_shf[hk, --, b, H, >>{32 - (n.bit_length() - 1)}]"]
        else:
            # hh * N as shifts, adds and subtracts of N's non-adjacent form (7 = 8 - 1: two
            # instructions, not four): rx runs this per frame at the edge of its budget
            top, *rest = _naf(n)
            out += ["    .reg hh hn ht", "    alu_shf[hh, --, b, H, >>16]", f"    alu_shf[hn, --, b, hh, <<{top[0]}]"]
            for b, sign in rest:  # alu_shf has no add: shift, then add or subtract
                op = "+" if sign > 0 else "-"
                if b == 0:
                    out += [f"    alu[hn, hn, {op}, hh]"]
                else:
                    out += [f"    alu_shf[ht, --, b, hh, <<{b}]", f"    alu[hn, hn, {op}, ht]"]
            out += ["    alu_shf[hk, --, b, hn, >>16]"]
        out += choose("hk")
    out += [".end", "#endm", ""]
    out += ["#macro npk_ring_full(R, LABEL)", *_ring_full_test(numbers)]
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
        "STAT_EXC_BASE": SYS.stat_exc_base, "TXDONE_BASE": SYS.txdone_base, "BATCH_COUNT": SYS.batch_count,
        "PW_TTL_LE1_BIT": SYS.pw_ttl_le1_bit, "PW_SRC_ON_IN_SUBNET_BIT": SYS.pw_src_on_in_subnet_bit,
        "EXC_RECORD": SYS.exc_record, "CAM_NET": CAM_NET, "CAM_BCAST": CAM_BCAST, "CAM_LOCAL": CAM_LOCAL,
        "LPM_CTL_BASE": lay.ctl_base, "LPM_ROOT_BASE": lay.root_base, "LPM_NODE_BASE": lay.node_base,
        "LPM_NH_BASE": lay.nh_base,
        "QM_QLIMIT": int(qm.get("qlimit", 256)), "QM_FIFO_BYTES": int(qm.get("fifo_bytes", 4096)), "QM_TX_WINDOW": int(qm.get("tx_window", 40)),
    }  # fmt: skip
    out = [
        "// npk_sys.h -- generated by `npk link` (npkit.toolchain.system.link); do not edit.",
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
        out += split_macros(split)
    out += ["#endif // NPK_SYS_H", ""]
    return "\n".join(out)


# ---- building -------------------------------------------------------------------------


def _router_config(router_config: str | Path | None, routes: str | Path | None) -> tuple[Any, Path, dict[str, Any]]:
    """The router config (read and checked once per process), the route file its tables
    come from, and what the image records of both (`meta["router"]`): the config with the
    route file and its digest, so that whoever runs the image (the oracle) sees the same
    table."""
    from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
    from npkit.emulator.traffic.routes import RouteError, check_route_file, load_route_columns

    from .router_image import RouterImageError, routes_digest

    cfg_path = Path(router_config) if router_config else DEFAULT_ROUTER
    try:
        config = RouterConfig.load(cfg_path)
    except ConfigError as e:
        raise LinkError(str(e)) from None
    if routes is None:
        routes = config.route_file if config.route_file else DEFAULT_ROUTES
    routes = Path(routes)
    if not (config.route_file and config.route_file.resolve() == routes.resolve()):
        try:  # as the config's own route file is checked: the errors name the file and line
            check_route_file([(p.address, p.prefix_len) for p in config.ports], load_route_columns(routes), routes)
        except (RouteError, OSError) as e:
            raise LinkError(str(e)) from None
    try:
        digest = routes_digest(routes)
    except OSError as e:
        raise LinkError(f"{e.filename or routes}: {e.strerror or e}") from None
    except RouterImageError as e:
        raise LinkError(str(e)) from None
    record = {**config.to_dict(), "routes": str(routes.resolve()), "routes_sha256": digest}
    return config, routes, record


def _tables(config: Any, routes: Path) -> list[tuple[int, bytes]]:
    """The lookup's SRAM contents (trie, next-hop table) for the config's ports and ARP
    table and the route file (npkit.toolchain.router.loader.sram_runs: C)."""
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.routes import RouteError, load_route_columns
    from npkit.toolchain.router.loader import Port, RouteFileError, RouterInfo, sram_runs

    assert isinstance(config, RouterConfig)
    info = RouterInfo([Port(p.index, p.address, p.prefix_len, p.mac) for p in config.ports], dict(config.arp))
    # the config's own route file was checked with it, another by _router_config
    own = config.route_file and config.route_file.resolve() == routes.resolve()
    cols = config.static_routes if own else load_route_columns(routes)
    try:
        return sram_runs(cols, info)
    except (RouteError, RouteFileError, MemoryError) as e:
        raise LinkError(f"{routes}: {e}") from None


def _check_batch(lay: Layout) -> None:
    """Layout parameter batch (microcode/include/npk_block.h): 1..16 messages a batch."""
    v = lay.params.get("batch", 1)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 16:
        raise LinkError(f"{lay.source}: params: batch: {v!r}: messages a context takes from its ring "
                        "before it yields, 1..16 (1: no batching)")  # fmt: skip


def _range_cache(lay: Layout, config: Any, routes: Path, tables: list[tuple[int, bytes]]) -> Any:
    """Panama's aggregate route cache for layout parameter lookup=range_cache
    (npkit.toolchain.router.range_cache): built from the trie the link writes and the
    route file's prefixes; its sets must lie above the scratch rings.  None otherwise."""
    if lay.params.get("lookup") != "range_cache":
        return None
    from npkit.emulator.traffic.routes import load_route_columns
    from npkit.toolchain.router.range_cache import RangeCacheError, build

    own = config.route_file and config.route_file.resolve() == routes.resolve()
    cols = config.static_routes if own else load_route_columns(routes)
    bits = lay.params.get("rc_bits", 7)
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise LinkError(f"{lay.source}: params: rc_bits: {bits!r}: K index bits, an integer 1..7")
    try:
        rc = build(tables, zip(cols.prefix, cols.length, strict=True), bits,
                   str(lay.params.get("rc_choice", "greedy")))  # fmt: skip
    except RangeCacheError as e:
        raise LinkError(f"{lay.source}: params: {e}") from None
    top = max((r.base + 4 * r.size for r in lay.rings.values()), default=SYS.ring_store)
    if top > rc.base:
        raise LinkError(f"{lay.source}: params: rc_bits: {len(rc.bits)}: the cache's {len(rc.entries)} sets need "
                        f"scratch 0x{rc.base:x}..0x{SYS.scratch_bytes - 1:x}, but the rings end at 0x{top:x}; "
                        "use fewer index bits")  # fmt: skip
    return rc


def _check_sram(tables: list[tuple[int, bytes]], config: str) -> None:
    """The tables must fit the chip's SRAM channels (a full Internet table needs more than
    the default 8 MB a channel)."""
    from npkit.emulator.binding import EmulatorError, load_config

    try:
        cap = int(load_config(config)["sram_channel_bytes"])
    except (EmulatorError, OSError, ValueError, KeyError):
        return  # the chip config's own error comes when a chip is made from it
    for start, data in tables:
        end = (start & 0x3FFF_FFFF) + len(data)
        if end > cap:
            raise LinkError(f"the route tables need {end / 2**20:.1f} MB of SRAM channel {start >> 30}; chip config "
                            f"{config} has {cap / 2**20:g} MB a channel (sram_channel_bytes; the HRM allows up to "
                            "64 MB: --config examples/chips/ixp2800_sram64.yaml)")  # fmt: skip


def _check_chip(lay: Layout, host: list[Block], chip: dict[str, Any], config: str) -> None:
    """What the layout needs of the chip that chip config `config` lacks: MEs past its
    count, SRAM areas of the memory map (sysmap.py) in channels it does not have.  All of
    them in one LinkError (a router linked for an IXP2400 failed only when run)."""
    from npkit.emulator.me_names import me_name, per_cluster

    num_me, k = int(chip["num_me"]), per_cluster(chip)
    channels = int(chip["units"]["sram"]["channels"])
    problems = []
    for b in [*lay.blocks.values(), *host]:
        over = [me for me in b.mes if me >= num_me]
        if over:
            problems.append(f"block {b.name} is on ME {', '.join(str(me) for me in over)} (flat index), "
                            f"past the chip's {num_me} MEs ({me_name(0, k)}..{me_name(num_me - 1, k)})")  # fmt: skip
    areas = [("the queue and packet descriptors", SYS.qd_base)]
    areas += [(f"the SRAM mailbox of {b.name}", int(b.defines["HOST_BASE"], 16)) for b in host]
    if lay.control is not None and lay.control.placement != "host":
        areas.append(("the control plane's area (statistics, exception log, route changes, buffers owned)",
                      CP_STATS_BASE))  # fmt: skip
    for what, addr in areas:
        if addr >> 30 >= channels:
            problems.append(f"{what} is in SRAM channel {addr >> 30} (0x{addr:08x}), past the chip's "
                            f"{channels} SRAM channel(s)")  # fmt: skip
    if problems:
        raise LinkError(f"layout {lay.name} does not fit chip config {config}: " + "; ".join(problems))


def _block_defines(layout: Layout, b: Block, per_cluster: int = 8) -> dict[str, str]:
    d = {"NUM_CONTEXTS": str(b.threads), "BLOCK_" + b.name.upper(): "1",
         "EXC_RING": str(layout.rings[layout.exceptions].number),
         "EXC_RING_STATUS": f"SCR_RING{layout.rings[layout.exceptions].number}_STATUS",
         "NUM_MES": str(len(b.mes)), "FIRST_ME": str(min(b.mes)),
         "ME_PER_CLUSTER": str(per_cluster), "ME_PER_CLUSTER_LOG2": str(per_cluster.bit_length() - 1)}  # fmt: skip
    if max(b.mes) >= per_cluster:
        d["ME_CLUSTER_1"] = "1"  # ACTIVE_CTX_STS carries the cluster (microcode/include/npk_block.h)
    if any(x.source == "tx/tx.uc" for x in layout.blocks.values()):
        d["MSF_TX"] = "1"  # the qm reads the PHY FIFO fill of the MSF's ports
    if b.ring_cp and layout.control is not None:
        d["RING_CP"] = str(layout.rings[b.ring_cp].number)
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


def _initial_memory(tables: list[tuple[int, bytes]]) -> list[tuple[str, int, bytes]]:
    mem: list[tuple[str, int, bytes]] = [("sram", start, data) for start, data in tables]
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


Allocation = tuple[str, int, int, str]  # (memory space, first byte, end byte, owner)


def system_allocations(lay: Layout) -> list[Allocation]:
    """The memory the router's system owns: the SRAM regions of microcode/lookup/sram_map.yaml
    (the route table and the descriptors), the statistics counters and the rings in scratch
    (the control plane's ring among them), the packet buffers in DRAM, and what the control
    daemon keeps in SRAM (statistics, exception log, route change log, the buffers it owns)."""
    from npkit.toolchain.router.layout import load_sram_map

    out: list[Allocation] = []
    for r in load_sram_map().values():
        what = "route table" if r.name.startswith("lpm_") else "system memory"
        out.append(("sram", r.base, r.end, f"the router's {what} ({r.name}, microcode/lookup/sram_map.yaml)"))
    out.append(("scratch", 0, SYS.ring_store, "the router's statistics counters (sysmap)"))
    for r in lay.rings.values():
        out.append(("scratch", r.base, r.base + 4 * r.size, f"scratch ring {r.name}"))
    out.append(("dram", SYS.buf_base, SYS.buf_base + (SYS.n_bufs << SYS.buf_shift), "the router's packet buffers"))
    if lay.control is not None and lay.control.placement != "host":
        from .control import control_allocations

        out += [("sram", a, b, f"the control daemon's {what} (sysmap)") for a, b, what in control_allocations()]
    return out


def check_allocations(programs: list[Any], system: list[Allocation], tables: list[Allocation] | None = None) -> None:
    """Every block's `.alloc_mem` (and an application's `tables`) against the system's
    memory and the other blocks':
    the assembler places each block's allocations from address 0 of their space, so two
    owners of the same bytes would overwrite each other at run time.  An overlap is a
    LinkError naming both owners."""
    owned = list(system) + list(tables or [])
    for prog in programs:
        for s in prog.symbols:
            if s.kind == "mem" and s.scope in ("sram", "dram", "scratch") and isinstance(s.value, int):
                owned.append((s.scope, s.value, s.value + max(int(s.size), 1),
                              f"block {prog.name}'s .alloc_mem {s.name}"))  # fmt: skip
    by_space: dict[str, list[Allocation]] = {}
    for a in owned:
        by_space.setdefault(a[0], []).append(a)
    for space, items in by_space.items():
        items.sort(key=lambda a: (a[1], a[2]))
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if b[1] >= a[2]:
                    break
                if a in system and b in system:
                    continue  # the system map's own layout is checked where it is defined
                raise LinkError(f"{space} 0x{max(a[1], b[1]):x}..0x{min(a[2], b[2]) - 1:x} is claimed twice: "
                                f"by {a[3]} ({space} 0x{a[1]:x}..0x{a[2] - 1:x}) and by {b[3]} "
                                f"({space} 0x{b[1]:x}..0x{b[2] - 1:x})")  # fmt: skip


def _host_blocks(lay: Layout, tx_confirm: bool = True, num_me: int = 16) -> list[tuple[str, Block]]:
    """Stand-ins for external blocks (phase 1: rx, tx, the XScale's exception reader):
    microcode/host/host_src.uc feeds a ring from an SRAM mailbox, host_sink.uc logs a
    ring into SRAM.  The exception sink goes on the highest ME nobody uses (of the
    chip's `num_me`)."""
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
    if lay.control is not None and lay.control.placement != "host":
        return out  # the control daemon reads the exception ring
    free = [me for me in range(num_me) if me not in used]
    if not free:
        raise LinkError("no ME left for the exception ring's host reader")
    out.append(("host/host_sink.uc", Block("host_exceptions", "host/host_sink.uc", [free[-1]], 8, lay.exceptions,
                                           None, {"HOST_BASE": hex(HOST_EXC_BASE)})))  # fmt: skip
    return out


def link(layout: str | Path | dict[str, Any] | None, params: dict[str, Any] | None = None,
         routes: str | Path | None = None, router_config: str | Path | None = None,
         config: str | None = None, tx_confirm: bool = True, warnings: list[str] | None = None,
         werror: bool = False, app: App | None = None) -> Any:  # fmt: skip
    """Build the system image for a layout.  Returns npkit.asm.image.Image; its
    meta holds the layout graph, the ring table, the system map and the router
    configuration.  External blocks get the stand-ins of `_host_blocks` (so the host can
    drive their rings), and the exception ring its host reader.  The assembler's
    warnings of every block go to `warnings` (each once, as `npk asm` renders it, with
    the blocks that gave it; a cached image's from the cache); `werror` makes them a
    LinkError.  With `app` (npkit.toolchain.system.app), `layout` is one of its layouts
    (or a file), its block sources and includes are looked up in its folders first, and
    its router config, routes and chip config (`config` None: the application's, else
    ixp2800) are the defaults."""
    from npkit.emulator.binding import EmulatorError, load_config
    from npkit.emulator.me_names import per_cluster

    config = chip_config_of(config, app)
    if app is not None:
        if not isinstance(layout, dict):  # (a mapping: a layout edited from one of the application's)
            layout = app.layout_file(None if layout is None else str(layout))
        router_config = router_config or app.file("router")
        routes = routes or app.file("routes")
    app_header = _app_reasons_header(app)
    app_tables = _app_tables(app)
    lay = load_layout(layout, params, app.source_dirs if app is not None else None)
    try:
        chip = load_config(config)
        k = per_cluster(chip)
    except EmulatorError as e:
        raise LinkError(str(e)) from None
    tcam_tables = _check_tcam_tables(app_tables, chip, config)
    host = _host_blocks(lay, tx_confirm, int(chip["num_me"]))
    _check_chip(lay, [b for _, b in host], chip, config)
    rcfg, routes_path, router_record = _router_config(router_config, routes)
    ensure_reasons_h()  # a reasons file the schema refuses fails every link, a cached image's too
    key = _image_key(layout, params, router_record, config, tx_confirm, lay.control)
    flows_file = _flows_file(lay, app)
    if flows_file is not None:
        from npkit.asm.base.cache import content_key

        key = content_key(key, "flows", flows_file.read_bytes())
    if app is not None:
        from npkit.asm.base.cache import content_key

        key = content_key(key, app.name, [str(d) for d in app.source_dirs], app.digest())
    cached = _cached_image(key, rcfg, router_record, lay)
    told = _cached_warnings(key) if cached is not None else None
    if cached is not None and (warnings is None or told is not None):
        _tell(told or [], warnings, werror)
        return cached
    # the assembler (and the ISA's encoders it builds) only when there is something to build
    from npkit.asm.assembler import assemble
    from npkit.asm.errors import AsmError, Diagnostics
    from npkit.asm.image import Image
    from npkit.emulator.run_config import recorded_config

    if len(rcfg.ports) > MAX_PORTS:
        raise LinkError(f"{len(rcfg.ports)} ports: the parse block's CAM holds the special "
                        f"addresses of at most {MAX_PORTS} ports")  # fmt: skip
    for b in lay.blocks.values():
        if b.source and "fastpath" in b.source and "LOOKUP_CAM_CACHE" in b.defines:
            raise LinkError(f"block {b.name}: LOOKUP_CAM_CACHE needs the CAM that the fast path's "
                            "parse step already uses for the router's own addresses")  # fmt: skip
        if "CLASSIFY_CAM_CACHE" in b.defines and ("LOOKUP_CAM_CACHE" in b.defines or not (b.source or "").startswith("classify/lookup")):
            raise LinkError(f"block {b.name}: flow_cache (CLASSIFY_CAM_CACHE) needs the lookup block's CAM to itself: "
                            "the pipelined layout with classify=flows and lookup_cache off")  # fmt: skip
    tables = _tables(rcfg, routes_path)
    _check_sram(tables, config)
    _check_batch(lay)
    rc = _range_cache(lay, rcfg, routes_path, tables)
    flows = _flow_table(lay, app, rcfg, chip)
    programs = []
    found: dict[tuple[str, Any], list[str]] = {}  # each warning once, with the blocks that gave it
    with tempfile.TemporaryDirectory(prefix="npk-link-") as tmp:
        _write_generated(tmp, rcfg, lay, app_header, app_tables, rc, flows)
        todo = [b for b in lay.blocks.values() if b.source is not None]
        todo += [b for _, b in host]
        for b in todo:
            src, incs, defines = block_inputs(lay, b, tmp, k, app.include if app is not None else ())
            defines = {**tcam_defines(chip), **defines}
            diags = Diagnostics()
            try:
                asm = assemble(src, include_dirs=incs, defines=defines, ctx_mode=b.threads, name=b.name, diags=diags)
            except AsmError as e:
                raise LinkError(f"block {b.name} ({b.source}): {e}") from None
            for message, loc in diags.warnings:
                found.setdefault((message, loc), []).append(b.name)
            prog = asm.program
            _name_generated(prog, tmp)
            prog.mes = list(b.mes)
            if b.name.startswith("host_"):
                prog.ctx_enable = 1  # the stand-ins poll their mailbox with one context
            programs.append(prog)
    if not programs:
        raise LinkError(f"{lay.source}: no block has microcode")
    rendered = [_render_warning(message, loc, blocks, tmp) for (message, loc), blocks in found.items()]
    rc_alloc = [] if rc is None else [("scratch", rc.base, SYS.scratch_bytes, "the range cache's sets (lookup=range_cache)")]
    window = tcam_base(chip)
    owned = [(t.memory, t.base, max(t.end, t.base + 1), f"table {t.name} ({t.source})") for t in app_tables
             if not t.is_tcam]
    if window is not None:
        owned.append(("sram", window, window + TCAM_WINDOW, f"the TCAM's window (chip config {config})"))
    if flows is not None:
        owned.append(("sram", flows.key_base, flows.end, f"the flow table ({flows.source})"))
    check_allocations(programs, system_allocations(lay) + rc_alloc, owned)
    programs[0].init_mem.extend(_initial_memory(tables))
    programs[0].init_mem.extend((t.memory, t.base, t.data()) for t in app_tables if t.rows and not t.is_tcam)
    if window is not None:  # the TCAM tables' rows: the entries of the window (its SRAM bytes)
        programs[0].init_mem.extend(("sram", window + TCAM_ENTRY_BYTES * t.first_entry, t.tcam_entries())
                                    for t in tcam_tables if t.rows)  # fmt: skip
    if rc is not None:
        programs[0].init_mem.extend(("scratch", a, data) for a, data in rc.scratch_image())
    if flows is not None:
        from npkit.toolchain.router.layout import default_layout

        programs[0].init_mem.extend(("sram", a, d) for a, d in flows.sram(rcfg, default_layout().nh_base))
    meta = {
        "layout": lay.name, "params": lay.params, "graph": lay.graph(),
        "rings": {r.name: {"ring": r.number, "base": r.base, "size": r.size,
                           "margin": max(2, 2 * sum(lay.blocks[p].threads * len(lay.blocks[p].mes)
                                                    for p in r.producers if p in lay.blocks)),
                           "producers": r.producers, "consumers": r.consumers} for r in lay.rings.values()},
        "exceptions": lay.exceptions,
        "sysmap": {k: getattr(SYS, k) for k in SYS.__dataclass_fields__},
        "router_config": str(rcfg.source or ""),
        "router": router_record,
    }  # fmt: skip
    if rc is not None:
        meta["range_cache"] = rc.meta()
    if lay.params.get("qm") in ("drr", "dfq"):  # the scheduler's judge reads its qm section
        meta["qm"] = dict(lay.qm)
    if app is not None:
        meta["app"] = {"name": app.name, "folder": str(app.folder), "reasons": [str(f) for f in app.reason_files]}
        if len(app.chain) > 1:
            meta["app"]["extends"] = app.chain[1]
        if app.file("model") is not None:
            meta["app"]["model"] = str(app.file("model"))
        if app_tables:
            meta["app"]["tables"] = {t.name: t.record() for t in app_tables}
    if tcam_tables:  # the chip the TCAM entries are for (npkit.emulator.loader refuses another)
        meta["tcam"] = {"base": window, "key_bits": int(chip["tcam"]["key_bits"]), "config": str(config)}
    if flows is not None:
        meta["flows"] = flows.record()
    if lay.control is not None:
        from .control import control_meta

        meta["control"] = control_meta(lay)
    image = Image(programs=programs, config=recorded_config(config), meta=meta)
    from npkit.asm.base.cache import cache_dir, cache_put
    from npkit.asm.image import ImageError, from_bytes, to_bytes

    if cache_dir() is not None:
        data = to_bytes(image)
        cache_put("image", key, data)
        cache_put("link-warnings", key, json.dumps(rendered).encode())
        try:
            from_bytes(data, "<cache>")  # its metadata's check cached too: the next run reads it without the schema
        except ImageError:
            pass  # the next run finds it unreadable and links again, as it would have
    _tell(rendered, warnings, werror)
    return image


def _tell(rendered: list[str], warnings: list[str] | None, werror: bool) -> None:
    """Hand the assembler's warnings to the caller; with `werror` they fail the link."""
    if warnings is not None:
        warnings.extend(rendered)
    if werror and rendered:
        raise LinkError(f"{len(rendered)} assembler warning(s) treated as errors (--Werror)")


def _render_warning(message: str, loc: Any, blocks: list[str], tmp: str) -> str:
    """An assembler warning as `npk asm` prints it (file:line:column, the line, a caret),
    naming the blocks whose assembly gave it; the generated header under GENERATED_DIR."""
    from npkit.asm.errors import format_diagnostic

    which = f"block {blocks[0]}" if len(blocks) == 1 else f"blocks {', '.join(blocks)}"
    return format_diagnostic("warning", f"{message} [{which}]", loc).replace(tmp, GENERATED_DIR)


def _cached_warnings(key: str) -> list[str] | None:
    from npkit.asm.base.cache import cache_get

    data = cache_get("link-warnings", key)
    if data is None:
        return None
    try:
        told = json.loads(data)
    except ValueError:
        return None
    return [str(w) for w in told] if isinstance(told, list) else None


def _write_sys_header(tmp: str, rcfg: Any, lay: Layout) -> None:
    split = [lay.rings[m].number for ms in lay.splits.values() for m in ms]
    (Path(tmp) / "npk_sys.h").write_text(sys_header(rcfg, lay.qm, split))
    (Path(tmp) / "npk_sched.h").write_text(sched_header(lay.qm))  # the qm's drr / dfq variants


def block_inputs(lay: Layout, b: Block, generated: str, per_cluster: int = 8,
                 app_include: Iterable[Path] = ()) -> tuple[Path, list[str], dict[str, str]]:  # fmt: skip
    """What block `b` of `lay` is assembled from: its source (an application's block
    source is a path of its own), the include directories (`generated`, where npk_sys.h
    is, first; then an application's) and the preprocessor defines."""
    assert b.source is not None
    src = MICROCODE / b.source
    incs = [generated, *(str(d) for d in app_include), str(INCLUDE), str(src.parent)] + [
        str(MICROCODE / x) for x in ("parse", "lookup", "hdr_format")
    ]
    return src, incs, _block_defines(lay, b, per_cluster)


@contextmanager
def layout_block(layout: str | Path | None, block: str, params: dict[str, Any] | None = None,
                 routes: str | Path | None = None, router_config: str | Path | None = None,
                 config: str = "ixp2800", app: App | None = None) -> Iterator[tuple[Block, Path, list[str], dict[str, str]]]:  # fmt: skip
    """Block `block` of `layout` as `link` assembles it: (the block, its source, include
    directories, defines), with the generated headers (npk_sys.h; with `app`, its
    reasons.h and <table>_table.h) in a temporary directory that lives inside the `with`.
    With `app`, `layout` is one of its layouts (None: its default) and the block is looked
    up in its folders first, as `link(..., app=app)` does.  A block the layout does not
    have, or one without microcode (external), is a LinkError naming those it has."""
    from npkit.emulator.binding import EmulatorError, load_config
    from npkit.emulator.me_names import per_cluster

    if app is not None:
        layout = app.layout_file(None if layout is None else str(layout))
        router_config = router_config or app.file("router")
        routes = routes or app.file("routes")
    assert layout is not None
    app_header = _app_reasons_header(app)
    app_tables = _app_tables(app)
    lay = load_layout(layout, params, app.source_dirs if app is not None else None)
    b = lay.blocks.get(block)
    if b is None or b.source is None:
        have = ", ".join(n for n, x in lay.blocks.items() if x.source is not None)
        what = "has no block" if b is None else "runs no microcode of its own in block"
        raise LinkError(f"{lay.source}: the layout {what} {block!r} (blocks with microcode: {have})")
    try:
        chip = load_config(config)
        k = per_cluster(chip)
    except EmulatorError as e:
        raise LinkError(str(e)) from None
    rcfg, routes_path, _ = _router_config(router_config, routes)
    ensure_reasons_h()
    rc = _range_cache(lay, rcfg, routes_path, _tables(rcfg, routes_path)) if lay.params.get("lookup") == "range_cache" else None
    flows = _flow_table(lay, app, rcfg, chip)
    with tempfile.TemporaryDirectory(prefix="npk-block-") as tmp:
        _write_generated(tmp, rcfg, lay, app_header, app_tables, rc, flows)
        src, incs, defines = block_inputs(lay, b, tmp, k, app.include if app is not None else ())
        yield b, src, incs, defines


def chip_config_of(config: str | None, app: App | None) -> str:
    """The chip config to link for: the one given, else the application's (`chip:`),
    else ixp2800."""
    return config or (app.chip if app is not None else None) or "ixp2800"


def _check_tcam_tables(tables: list[Any], chip: dict[str, Any], config: str) -> list[Any]:
    """The application's tcam tables, checked against the chip's TCAM (docs/tcam.md)."""
    tcam = [t for t in tables if t.is_tcam]
    if not tcam:
        return []
    t0 = tcam[0]
    have = chip.get("tcam")
    if not have:
        raise LinkError(f"{t0.where()}: a tcam table, and chip config {config} has no TCAM (chip: in app.yaml or "
                        "--config naming one with a tcam: block, e.g. examples/chips/ixp2850_spp.yaml)")  # fmt: skip
    for t in tcam:
        if t.key_bits_used() > int(have["key_bits"]):
            raise LinkError(f"{t.where()}: the key's fields take {t.key_bits_used()} bits as packed; the TCAM of "
                            f"chip config {config} has {have['key_bits']}-bit keys")  # fmt: skip
        if t.first_entry + len(t.rows) > int(have["entries"]):
            raise LinkError(f"{t.where()}: {len(t.rows)} rows from entry {t.first_entry}; the TCAM of chip config "
                            f"{config} has {have['entries']} entries")  # fmt: skip
        if int(have["result_bits"]) == 32 and any(w == 1 for w, _, _ in t.result_placement.values()):
            raise LinkError(f"{t.where()}: the result fields take more than the 32-bit results of the TCAM of "
                            f"chip config {config}")  # fmt: skip
    return tcam


def _write_generated(tmp: str, rcfg: Any, lay: Any, app_header: str | None, app_tables: list[Any],
                     rc: Any = None, flows: Any = None) -> None:
    """The link's generated headers in `tmp`: npk_sys.h (with the range cache's addresses
    and index macro under lookup=range_cache), and an application's reasons.h (its codes
    beside npkit's) and <table>_table.h; with classify=flows, flows_table.h."""
    _write_sys_header(tmp, rcfg, lay)
    if rc is not None:
        with open(Path(tmp) / "npk_sys.h", "a") as f:
            f.write(rc.header())
    if app_header is not None:
        (Path(tmp) / "reasons.h").write_text(app_header)
    for t in app_tables:
        (Path(tmp) / f"{t.name}_table.h").write_text(t.header())
    if flows is not None:  # -D classify=flows: the flow table's place (docs/flows.md)
        (Path(tmp) / "flows_table.h").write_text(_flows_header(flows))


def _flows_file(lay: Layout, app: App | None) -> Path | None:
    """The flow declarations of a layout whose blocks classify (a `classify/` source):
    the application's `classify/flows.yaml` if it has one, else npkit's."""
    if not any(b.source and b.source.startswith("classify/") for b in lay.blocks.values()):
        return None
    for d in (*(app.source_dirs if app is not None else ()), MICROCODE):
        f = Path(d) / "classify" / "flows.yaml"
        if f.exists():
            return f
    return MICROCODE / "classify" / "flows.yaml"


def _flow_table(lay: Layout, app: App | None, rcfg: Any, chip: dict[str, Any]) -> Any:
    """The compiled flow table (npkit.emulator.traffic.flows) of `-D classify=flows`."""
    from npkit.emulator.traffic.flows import FlowError, load_flows

    f = _flows_file(lay, app)
    if f is None:
        return None
    mult = (int(chip.get("hash_mult128_hi", 0)) << 64) | int(chip.get("hash_mult128_lo", 0))
    try:
        return load_flows(f, rcfg, mult)
    except FlowError as e:
        raise LinkError(str(e)) from None


def _flows_header(flows: Any) -> str:
    from npkit.toolchain.router.layout import default_layout

    nh0 = flows.nh_index(0, default_layout().nh_base)
    d = {"FLOW_BUCKETS": flows.buckets, "FLOW_KEY_BASE": flows.key_base, "FLOW_AUX_BASE": flows.aux_base,
         "FLOW_NH0": nh0, "FLOW_GEN": flows.gen_addr}
    return "\n".join(["// flows_table.h -- generated by `npk link` from " + flows.source + "; do not edit.",
                      *(f"#define {k:<16} 0x{v:X}" for k, v in d.items()), ""])


def _app_tables(app: App | None) -> list[Any]:
    """The application's tables (npkit.toolchain.system.app_tables), compiled."""
    if app is None or app.file("tables") is None:
        return []
    from .app_tables import load_tables

    return load_tables(app.file("tables"))


def _app_reasons_header(app: App | None) -> str | None:
    """reasons.h for an application that declares reasons of its own (npkit's and its
    bases' with them), None when npkit's microcode/include/reasons.h is the one."""
    if app is None or not app.own_reasons:
        return None
    from .app import app_reasons

    return app_reasons(app).c_header()


# where the image says the generated npk_sys.h was (its scopes, line table and sources
# name it): the same for every link, so that linking the same inputs twice gives the
# same bytes (the temporary directory it was written to is gone after the link anyway)
GENERATED_DIR = "<npk link>"


def _name_generated(prog: Program, tmp: str) -> None:
    """Replace the temporary directory in `prog`'s source references by GENERATED_DIR."""
    def fix(text: str) -> str:
        return text.replace(tmp, GENERATED_DIR)

    for sym in prog.symbols:
        if isinstance(sym.scope, str):
            sym.scope = fix(sym.scope)
    for entry in prog.lines:
        entry.file = fix(entry.file)
        entry.macro = fix(entry.macro)
    prog.source_files = [fix(f) for f in prog.source_files]


def _image_key(layout: str | Path | dict[str, Any], params: dict[str, Any] | None, router_record: dict[str, Any],
               config: str, tx_confirm: bool, control: Any = None) -> str:  # fmt: skip
    """What a linked image is a function of: the layout (its text), the parameters, the
    router config and route file (by content, not by path), the chip config, the code
    and microcode that build it, and its control plane (`control`: the layout's
    ControlSpec; placement, program, arguments, options and the program's sources)."""
    from npkit.asm.base.cache import code_digest, content_key
    from npkit.asm.base.reading import CONFIG_LIMIT, read_bytes

    if isinstance(layout, dict):
        lay_ident: Any = layout
    else:
        p = Path(layout)
        if not p.exists() and (LAYOUTS / f"{layout}.yaml").exists():
            p = LAYOUTS / f"{layout}.yaml"
        lay_ident = read_bytes(p, limit=CONFIG_LIMIT, error=LinkError, what="layout") if p.exists() else str(layout)
    router = {k: v for k, v in router_record.items() if k != "routes"}
    cfg_ident: Any = config
    cp = Path(config)
    if cp.suffix in (".yaml", ".yml") and cp.exists():
        cfg_ident = read_bytes(cp, limit=CONFIG_LIMIT, error=LinkError, what="chip config")
    ctl: Any = None
    if control is not None:
        from npkit.xscale.toolchain import program_digest

        ctl = {**control.to_meta(), "sources": program_digest(control.program) if control.placement != "host" else ""}
    return content_key("image/2", lay_ident, params or {}, router, cfg_ident, tx_confirm, ctl, code_digest())


def _cached_image(key: str, rcfg: Any, router_record: dict[str, Any], lay: Layout) -> Any:
    """A cached image with this run's paths in its meta (the router config and route file
    it records are these, by content), or None.  Its control program is built again if
    it is gone (the key has its sources: the one built is theirs)."""
    from npkit.asm.base.cache import cache_get
    from npkit.asm.image import ImageError, from_bytes

    data = cache_get("image", key)
    if data is None:
        return None
    try:
        image = from_bytes(data, "<cache>")
    except ImageError:
        return None
    image.meta["router"] = dict(router_record)
    image.meta["router_config"] = str(rcfg.source or "")
    if lay.control is not None:
        from .control import control_meta

        image.meta["control"] = control_meta(lay)
    return image
