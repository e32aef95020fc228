"""SRAM map (microcode/lookup/sram_map.yaml) and the constants of the LPM layout.

Every number here is defined in microcode/lookup/LAYOUT.md; keep the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.asm.base.yaml_data import load_data

SRAM_MAP_PATH = Path(__file__).resolve().parents[2] / "microcode" / "lookup" / "sram_map.yaml"

# --- trie entries (root entries and DENSE32 node entries), one longword each
ENTRY_CHILD = 0x8000_0000  # bit 31: 1 = pointer to a node, 0 = leaf
TYPE_SHIFT = 28  # bits 30..28: node type of the child
TYPE_MASK = 0x7
OFFSET_MASK = 0x00FF_FFFF  # bits 23..0: child offset in 16-byte units from lpm_nodes base
NH_MASK = 0xFFFF  # leaf: bits 15..0 next-hop index (0 = no route)

# --- node types
DENSE32 = 0  # 256 x 1 LW entries (leaf or child), 1 KB
DENSE16 = 1  # 256 x 16-bit next-hop indices, leaves only, 512 B
RUNS = 2  # up to 5 runs of equal next hop in one 16-byte block, leaves only

UNIT = 16  # node pool allocation unit, bytes
NODE_UNITS = {DENSE32: 64, DENSE16: 32, RUNS: 1}
NODE_NAMES = {DENSE32: "dense32", DENSE16: "dense16", RUNS: "runs"}
RUNS_MAX = 5  # runs a RUNS node holds (4 boundaries, 5 values)

ROOT_ENTRIES = 1 << 16
NH_ENTRY_BYTES = 16

CTL_MAGIC = 0x4C504D31  # "LPM1"
CTL_VERSION = 1


def leaf(nh: int) -> int:
    """Leaf entry for next-hop index `nh` (0 = no route)."""
    if not 0 <= nh <= NH_MASK:
        raise ValueError(f"next-hop index {nh} outside 0..{NH_MASK}")
    return nh


def child(node_type: int, offset_units: int) -> int:
    """Pointer entry to a node of `node_type` at `offset_units` x 16 B into the pool."""
    if not 0 <= offset_units <= OFFSET_MASK:
        raise ValueError(f"node offset {offset_units} does not fit 24 bits")
    return ENTRY_CHILD | (node_type << TYPE_SHIFT) | offset_units


@dataclass(frozen=True)
class Region:
    name: str
    base: int
    size: int
    channel: int = 0
    placeholder: bool = False

    @property
    def end(self) -> int:
        return self.base + self.size


@dataclass(frozen=True)
class LpmLayout:
    """Where the four LPM regions are (byte addresses)."""

    ctl_base: int
    root_base: int
    nh_base: int
    nh_capacity: int  # entries
    node_base: int
    node_bytes: int

    @property
    def node_units(self) -> int:
        return self.node_bytes // UNIT

    def root_addr(self, index16: int) -> int:
        return self.root_base + 4 * index16

    def node_addr(self, offset_units: int) -> int:
        return self.node_base + UNIT * offset_units

    def nh_addr(self, index: int) -> int:
        return self.nh_base + NH_ENTRY_BYTES * index


def load_sram_map(path: str | Path | None = None) -> dict[str, Region]:
    data: dict[str, Any] = load_data(Path(path or SRAM_MAP_PATH).read_text())
    regions = {
        name: Region(
            name,
            int(spec["base"]),
            int(spec["size"]),
            int(spec.get("channel", 0)),
            bool(spec.get("placeholder", False)),
        )
        for name, spec in data["regions"].items()
    }
    ordered = sorted(regions.values(), key=lambda r: r.base)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.end > b.base:
            raise ValueError(f"SRAM regions {a.name} and {b.name} overlap")
    channels = {int(c): int(spec["size"]) for c, spec in (data.get("channels") or {}).items()}
    for r in regions.values():
        if r.base % UNIT or r.size % 4:
            raise ValueError(f"SRAM region {r.name}: base must be 16-byte aligned")
        if r.base >> 30 != r.channel:
            raise ValueError(f"SRAM region {r.name}: base is not in channel {r.channel}")
        if r.channel in channels and (r.base & 0x3FFF_FFFF) + r.size > channels[r.channel]:
            raise ValueError(f"SRAM region {r.name} runs past the end of channel {r.channel}")
    return regions


def layout_from_map(regions: dict[str, Region]) -> LpmLayout:
    root = regions["lpm_root"]
    if root.size < 4 * ROOT_ENTRIES:
        raise ValueError("lpm_root needs 256 KB (65,536 longwords)")
    nh = regions["lpm_nexthop"]
    nodes = regions["lpm_nodes"]
    return LpmLayout(
        ctl_base=regions["lpm_ctl"].base,
        root_base=root.base,
        nh_base=nh.base,
        nh_capacity=min(nh.size // NH_ENTRY_BYTES, NH_MASK + 1),
        node_base=nodes.base,
        node_bytes=min(nodes.size, (OFFSET_MASK + 1) * UNIT),
    )


def default_layout() -> LpmLayout:
    return layout_from_map(load_sram_map())
