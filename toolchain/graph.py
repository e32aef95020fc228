"""`npk graph`: Graphviz pictures of layouts and of control flow.

    npk graph layout microcode/layouts/pipelined.yaml -o pipelined.svg
    npk graph cfg examples/hello.uc -o hello.svg         (.uc or an image; --program NAME)

The output format follows the suffix of -o: .dot writes the Graphviz source, anything
else (.svg, .png, .pdf) runs `dot -T<suffix>` (Debian package graphviz).

Control-flow graphs are built from the assembled words, so they show what runs: basic
blocks labelled with their addresses and source lines (macro bodies marked), taken
edges (solid) and fall-through edges (dashed) leaving after the defer slots, which stay
in the branch's block marked `defer`; instructions where the context may swap out
(`ctx_arb`, `ctx_swap[...]`) are marked and their blocks shaded.  A `jump[reg, l#]` goes
where the register says: its edges come from the `targets[a#, b#]` hint in the source
line when the source is found, else it is drawn to a "computed" node.  `rtn` likewise.

Layouts are read by the linker (npkit.toolchain.system.layout.load_layout), as `npk link` reads them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from npkit.asm.base.writing import OutputError, check_writable, write_output
from npkit.asm.image import Image, ImageError, Program, pick_program
from npkit.asm.isa import DecodeError, decode, operand_roles, split_instruction
from npkit.asm.preprocess import source_lines
from npkit.emulator.me_names import me_name


class GraphError(ValueError):
    pass


# ------------------------------------------------------------------------------ output


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _left(lines: list[str]) -> str:
    """A dot label with left-justified lines."""
    body = "".join(s.replace("\\", "\\\\").replace('"', '\\"') + "\\l" for s in lines)
    return f'"{body}"'


def render(dot_text: str, out: Path) -> None:
    fmt = out.suffix.lstrip(".").lower()
    if fmt in ("dot", "gv", ""):
        write_output(out, dot_text)
        return
    check_writable(out)  # dot's own message would not name the path
    exe = shutil.which("dot")
    if exe is None:
        raise GraphError("the `dot` program (Debian package graphviz) is not installed; "
                         "run `make`, or write .dot and render it elsewhere")  # fmt: skip
    r = subprocess.run([exe, f"-T{fmt}", "-o", str(out)], input=dot_text, text=True, capture_output=True)
    if r.returncode != 0:
        raise GraphError(f"dot failed: {r.stderr.strip()}")


# ------------------------------------------------------------------------------ CFG


@dataclass
class Instr:
    addr: int
    text: str
    mnemonic: str
    targets: list[int] = field(default_factory=list)
    defer: int = 0
    uncond: bool = False  # never falls through
    computed: bool = False  # jump / rtn through a register
    wait: bool = False  # the context may swap out here
    end: bool = False  # halt / ctx_arb[kill]


@dataclass
class Block:
    start: int
    end: int  # inclusive
    succ: list[tuple[int | str, str]] = field(default_factory=list)  # (block start | node name, kind)


def analyse(prog: Program) -> list[Instr]:
    out = []
    for addr, w in enumerate(prog.words):
        try:
            text = decode(w, prog.ctx_mode)
        except DecodeError:
            out.append(Instr(addr, f".word 0x{w:010x}", ".word"))
            continue
        sp = split_instruction(text)
        mn = sp.mnemonic.lower()
        ins = Instr(addr, text, mn)
        for i, role in enumerate(operand_roles(sp.mnemonic, list(sp.args))):
            if role.kind == "label" and sp.args[i].isdigit() and mn != "jump":
                ins.targets.append(int(sp.args[i]))
        for t in sp.tokens:
            name = t.name.lower()
            if name == "br" and t.args and t.args[0].isdigit():
                ins.targets.append(int(t.args[0]))
                ins.uncond = True  # ctx_arb[...], br[l#]: resumes at l#
            elif name == "defer" and t.args and t.args[0].isdigit():
                ins.defer = int(t.args[0])
            elif name == "ctx_swap":
                ins.wait = True
        if mn == "ctx_arb":
            ins.wait = True
            if sp.args and sp.args[0].lower() == "kill":
                ins.end = ins.uncond = True
        if mn == "halt":
            ins.end = ins.uncond = True
        if mn == "br":
            ins.uncond = True
        if mn in ("jump", "rtn"):
            ins.uncond = ins.computed = True
        out.append(ins)
    return out


def _jump_hints(prog: Program, ins: Instr, source_lines: dict[str, list[str] | None]) -> list[int] | None:
    entry = prog.line_at(ins.addr)
    if entry is None:
        return None
    lines = source_lines.get(entry.file)
    if lines is None or not 1 <= entry.line <= len(lines):
        return None
    m = re.search(r"targets\s*\[([^\]]*)\]", lines[entry.line - 1])
    if not m:
        return None
    labels = {s.name: int(s.value) for s in prog.symbols if s.kind == "label" and isinstance(s.value, int)}
    out = []
    for name in m[1].split(","):
        name = name.strip().rstrip("#")
        if name in labels:
            out.append(labels[name])
    return out


def _read_sources(prog: Program, search: list[Path]) -> dict[str, list[str] | None]:
    out: dict[str, list[str] | None] = {}
    for e in prog.lines:
        if e.file in out:
            continue
        out[e.file] = None
        for p in [Path(e.file)] + [d / e.file for d in search] + [d / Path(e.file).name for d in search]:
            out[e.file] = source_lines(p)
            if out[e.file] is not None:
                break
    return out


def build_cfg(prog: Program, search: list[Path] | None = None) -> tuple[list[Instr], list[Block]]:
    instrs = analyse(prog)
    n = len(instrs)
    sources = _read_sources(prog, search or [])
    hints: dict[int, list[int] | None] = {}
    leaders = {0}
    for ins in instrs:
        if ins.mnemonic == "jump":
            hints[ins.addr] = _jump_hints(prog, ins, sources)
            ins.targets = list(hints[ins.addr] or [])
        after = ins.addr + ins.defer + 1
        if ins.targets or ins.uncond:
            if after < n:
                leaders.add(after)
        for t in ins.targets:
            if 0 <= t < n:
                leaders.add(t)
    for lab in prog.labels():
        if 0 <= lab < n:
            leaders.add(lab)
    starts = sorted(leaders)
    blocks: list[Block] = []
    for i, s in enumerate(starts):
        e = (starts[i + 1] if i + 1 < len(starts) else n) - 1
        blocks.append(Block(s, e))
    for b in blocks:
        # the controlling instruction: the last branch whose defer slots end the block
        ctl = next((ins for ins in reversed(instrs[b.start : b.end + 1])
                    if (ins.targets or ins.uncond) and ins.addr + ins.defer >= b.end), None)  # fmt: skip
        if ctl is None:
            if b.end + 1 < n:
                b.succ.append((b.end + 1, "fall"))
            continue
        for t in ctl.targets:
            b.succ.append((t if 0 <= t < n else f"addr {t}", "taken"))
        if ctl.computed and not ctl.targets:
            b.succ.append(("computed", "jump" if ctl.mnemonic == "jump" else "rtn"))
        if ctl.end:
            b.succ.append(("end", "end"))
        if not ctl.uncond and b.end + 1 < n:
            b.succ.append((b.end + 1, "fall"))
    return instrs, blocks


def cfg_dot(prog: Program, search: list[Path] | None = None, max_lines: int = 14) -> str:
    instrs, blocks = build_cfg(prog, search)
    sources = _read_sources(prog, search or [])
    labels = prog.labels()
    out = [f"digraph {_q('cfg ' + prog.name)} {{", '  node [shape=box fontname="monospace" fontsize=10];',
           '  edge [fontname="monospace" fontsize=9];', f'  label={_q(f"control flow of {prog.name}")}; labelloc=t;']  # fmt: skip
    extra: set[str] = set()
    for b in blocks:
        rows = [f"{labels[b.start]}#" if b.start in labels else f"block {b.start}", f"[{b.start}..{b.end}]"]
        shown: list[tuple[str, int]] = []
        defer_left = 0
        wait = False
        for ins in instrs[b.start : b.end + 1]:
            e = prog.line_at(ins.addr)
            mark = ""
            if defer_left:
                mark = " (defer)"
                defer_left -= 1
            if ins.targets or ins.uncond:
                defer_left = ins.defer
            if ins.wait:
                mark += " (may swap)"
                wait = True
            if e is None:
                rows.append(f"{ins.addr:4d}  {ins.text}{mark}")
                continue
            key = (e.file, e.line)
            if shown and shown[-1] == key and not mark:
                continue
            shown.append(key)
            src_lines = sources.get(e.file)
            src = src_lines[e.line - 1].strip() if src_lines and 0 < e.line <= len(src_lines) else ins.text
            src = re.sub(r"\s*//.*$", "", src)
            macro = " [macro]" if e.macro else ""
            rows.append(f"{ins.addr:4d}  {Path(e.file).name}:{e.line}{macro}  {src}{mark}")
        if len(rows) > max_lines + 2:
            rows = rows[: max_lines + 1] + [f"... {len(rows) - max_lines - 1} more lines", rows[-1]]
        style = ' style=filled fillcolor="#ffe9b3"' if wait else ""
        out.append(f"  b{b.start} [label={_left(rows)}{style}];")
        for dst, kind in b.succ:
            if isinstance(dst, int):
                target = f"b{dst}"
            else:
                target = re.sub(r"\W", "_", dst)
                if target not in extra:
                    extra.add(target)
                    shape = "doublecircle" if dst == "end" else "diamond"
                    out.append(f"  {target} [label={_q(dst)} shape={shape}];")
            attrs = {"fall": ' [style=dashed label="fall"]', "taken": ' [label="taken"]',
                     "end": " [style=dotted]"}.get(kind, f' [style=bold label="{kind}"]')  # fmt: skip
            out.append(f"  b{b.start} -> {target}{attrs};")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ layouts


@dataclass
class LBlock:
    name: str
    mes: list[int]
    inputs: list[str]
    outputs: list[str]
    source: str = ""
    threads: int | None = None
    exceptions: list[str] = field(default_factory=list)  # the reasons its code raises


@dataclass
class Layout:
    name: str
    blocks: list[LBlock]
    rings: dict[str, dict[str, Any]]  # name -> {type, ...}
    exception: str | None
    memories: dict[str, str]  # name -> description
    control_rings: list[str] = field(default_factory=list)  # rings the control plane puts frames on


def from_linker(path: str | Path) -> Layout:
    """The layout as the router's linker reads it (its one reader: parameters substituted,
    ME ranges expanded); the linker's reason when it rejects the file."""
    from npkit.toolchain.system.layout import LinkError, load_layout

    try:
        lay = load_layout(path)
    except LinkError as e:
        raise GraphError(str(e)) from None
    raising = _exception_raisers(path) if lay.exceptions else {}
    blocks = []
    for b in lay.blocks.values():
        # a block with no input ring takes packets from the MSF (rx), one with no output ring
        # hands them to it (tx)
        ins = [b.ring_in] if b.ring_in else (["msf"] if b.ring_out else [])
        if b.ring_cp:  # frames the control plane sends (ICMP, ARP, held packets)
            ins.append(b.ring_cp)
        outs = [b.ring_out] if b.ring_out else (["msf"] if b.ring_in else [])
        if raising.get(b.name):  # only a block whose code raises an exception puts on the ring
            outs.append(lay.exceptions)
        src = b.source or "external (host stand-in)"
        blocks.append(LBlock(b.name, list(b.mes), ins, outs, src, b.threads if b.source else None,
                             raising.get(b.name, [])))
    cp_rings = sorted({b.ring_cp for b in lay.blocks.values() if b.ring_cp})
    split_members = {m: name for name, ms in lay.splits.items() for m in ms}
    rings = {r.name: {"type": "scratch", "ring": r.number, "size": r.size}
             for r in lay.rings.values() if r.name not in split_members}  # fmt: skip
    for name, members in lay.splits.items():  # one node: the rings of a split, one per consumer ME
        nums = ",".join(str(lay.rings[m].number) for m in members)
        rings[name] = {"type": "scratch", "ring": f"{nums} (one per ME)", "size": lay.rings[members[0]].size}
    try:
        from npkit.toolchain.system.sysmap import SYS

        bufs = f"packet buffers ({(1 << SYS.buf_shift) // 1024} KB, frame at +{SYS.pkt_pad})"
    except ImportError:
        bufs = "packet buffers"
    memories = {"DRAM": bufs,
                "SRAM": "route trie, next hops, buffer descriptors, free list, port queues",
                "scratch": "rings, statistics"}  # fmt: skip
    return Layout(lay.name, blocks, rings, lay.exceptions, memories, cp_rings)


def _exception_raisers(path: str | Path) -> dict[str, list[str]]:
    """Per block of the linked layout, the exception reasons its code raises: the
    `EXC_<REASON>` names (microcode/reasons.yaml) on the source lines of its words."""
    from npkit.emulator.traffic.reasons import load_reasons
    from npkit.toolchain.system.layout import LinkError
    from npkit.toolchain.system.link import link

    try:
        image = link(path)
    except LinkError as e:
        raise GraphError(str(e)) from None
    names = {r.macro: r.name for r in load_reasons().exceptions.values()}
    out: dict[str, list[str]] = {}
    for prog in image.programs:
        sources = _read_sources(prog, [])
        found: set[str] = set()
        for file, line in {(e.file, e.line) for e in prog.lines}:
            text = (sources.get(file) or [])[line - 1 : line]
            code = re.sub(r"(//|;).*$", "", text[0]) if text else ""
            found.update(names[m] for m in re.findall(r"\bEXC_\w+", code) if m in names)
        out[prog.name] = sorted(found)
    return out


def layout_dot(lay: Layout) -> str:
    out = [f"digraph {_q('layout ' + lay.name)} {{", "  rankdir=LR;", '  node [fontname="Helvetica" fontsize=11];',
           '  edge [fontname="Helvetica" fontsize=9];', f'  label={_q(f"layout {lay.name}")}; labelloc=t;']  # fmt: skip
    ring_names = set(lay.rings)
    for b in lay.blocks:
        ring_names.update(x for x in b.inputs + b.outputs if x not in ("msf", "rx", "tx", "xscale"))
    if lay.exception:
        ring_names.add(lay.exception)

    def nid(kind: str, name: str) -> str:
        return re.sub(r"\W", "_", f"{kind}_{name}")

    out.append('  subgraph cluster_chip { label="microengines"; style=rounded; color="#777777";')
    for b in lay.blocks:
        mes = ", ".join(me_name(m, 8) for m in b.mes) if b.mes else "?"  # layouts are IXP2800 (8 MEs a cluster)
        rows = [b.name, f"ME {mes}"] + ([f"{b.threads} threads"] if b.threads else [])
        if b.source:
            rows.append(Path(b.source).name if not b.source.startswith("external") else b.source)
        fill = "#eeeeee" if b.source.startswith("external") else "#dbe9ff"
        out.append(f'    {nid("blk", b.name)} [shape=box style="rounded,filled" fillcolor="{fill}" '
                   f"label={_q(chr(10).join(rows))}];")  # fmt: skip
    out.append("  }")
    uses_msf_in = any(x in ("msf", "rx") for b in lay.blocks for x in b.inputs)
    uses_msf_out = any(x in ("msf", "tx") for b in lay.blocks for x in b.outputs)
    if uses_msf_in:
        out.append('  msf_rx [shape=cds style=filled fillcolor="#e0f5e0" label="MSF receive\\nports"];')
    if uses_msf_out:
        out.append('  msf_tx [shape=cds style=filled fillcolor="#e0f5e0" label="MSF transmit\\nports"];')
    for r in sorted(ring_names):
        info = lay.rings.get(r, {})
        kind = str(info.get("type", info.get("kind", "ring")))
        extra = [f"{k} {v}" for k, v in info.items() if k in ("ring", "size", "base", "me")]
        is_exc = r == lay.exception or "exc" in r.lower()
        color = "#ffd6d6" if is_exc else "#fff2c4"
        out.append(f"  {nid('ring', r)} [shape=cylinder style=filled fillcolor=\"{color}\" "
                   f"label={_q(chr(10).join([r, kind] + extra))}];")  # fmt: skip
    if lay.exception or lay.control_rings or any("exc" in r.lower() for r in ring_names):
        out.append('  xscale [shape=box3d style=filled fillcolor="#f0d8ff" label="XScale\\ncontrol daemon"];')
        for r in sorted(ring_names):
            if r == lay.exception or "exc" in r.lower():
                out.append(f'  {nid("ring", r)} -> xscale [color="#c00000" label="exceptions"];')
        for r in lay.control_rings:
            out.append(f'  xscale -> {nid("ring", r)} [color="#7030a0" label="ICMP, ARP, held"];')
    for b in lay.blocks:
        for x in b.inputs:
            src = "msf_rx" if x in ("msf", "rx") else nid("ring", x)
            out.append(f"  {src} -> {nid('blk', b.name)};")
        for x in b.outputs:
            dst = "msf_tx" if x in ("msf", "tx") else ("xscale" if x == "xscale" else nid("ring", x))
            exc = x == lay.exception or "exc" in x.lower()
            why = f' label={_q(", ".join(b.exceptions))}' if exc and b.exceptions else ""
            red = f' [color="#c00000"{why}]' if exc else ""
            out.append(f"  {nid('blk', b.name)} -> {dst}{red};")
    if lay.memories:
        out.append('  subgraph cluster_mem { label="memories"; style=dashed;')
        for k, v in lay.memories.items():
            out.append(f"    {nid('mem', k)} [shape=folder label={_q(k + chr(10) + v)}];")
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ commands


SYS_HEADER = re.compile(r'^\s*#include\s+[<"]npk_sys\.h[>"]', re.M)


def _block_program(path: str, layouts: list[str | Path], params: dict[str, Any]) -> tuple[Program, list[Path]] | None:
    """The program `npk link` builds from the block source `path` in the first of `layouts`
    that has it as a block (with that layout's include path, its generated npk_sys.h and
    the block's defines); None when none has it."""
    from npkit.toolchain.system.layout import LinkError, load_layout
    from npkit.toolchain.system.link import link
    from npkit.toolchain.system.paths import MICROCODE

    want = Path(path).resolve()
    for lay_path in layouts:
        try:
            lay = load_layout(lay_path, params)
            block = next((b for b in lay.blocks.values() if b.source and (MICROCODE / b.source).resolve() == want), None)
            if block is None:
                continue
            image = link(lay_path, params)
        except LinkError as e:
            raise GraphError(str(e)) from None
        prog = next(p for p in image.programs if p.name == block.name)
        return prog, [want.parent, MICROCODE, Path.cwd()]
    return None


def _layouts_for(layout: str | None) -> list[str | Path]:
    from npkit.toolchain.system.paths import LAYOUTS

    if layout is not None:
        return [layout]
    return sorted(LAYOUTS.glob("*.yaml"), key=lambda p: (p.stem != "pipelined", p.stem))


def _program_of(path: str, name: str | None, layout: str | None = None,
                params: dict[str, Any] | None = None) -> tuple[Program, list[Path]]:  # fmt: skip
    from npkit.toolchain.debug.target import SOURCE_SUFFIXES, TargetError, read_target_image

    p = Path(path)
    if p.suffix in SOURCE_SUFFIXES and (layout is not None or SYS_HEADER.search(p.read_text(errors="replace"))):
        layouts = _layouts_for(layout)
        found = _block_program(path, layouts, params or {})
        if found is not None:
            return found
        names = ", ".join(Path(x).stem for x in layouts)
        given = " with these -D parameters" if params else " with their default parameters (-D PARAM=VALUE picks a variant)"
        raise GraphError(f"{path} includes npk_sys.h, which `npk link` generates for the blocks of a layout, "
                         f"but it is not the source of a block of {names}{given}")  # fmt: skip
    try:
        image: Image = read_target_image(path)
    except TargetError as e:
        raise GraphError(str(e)) from None
    try:
        prog = pick_program(image.programs, name, path)
    except ImageError as e:
        raise GraphError(str(e)) from None
    d = Path(path).resolve().parent
    return prog, [d, d.parent, d.parent.parent, Path.cwd()]


@click.group("graph")
def graph() -> None:
    """Graphviz pictures: layouts and control-flow graphs."""


@graph.command("layout")
@click.argument("layout")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="out.svg, out.png or out.dot")
def graph_layout(layout: str, output: str) -> None:
    """Picture of LAYOUT (a name in microcode/layouts or a YAML file): blocks on their MEs,
    rings, memories, the exception path."""
    try:
        lay = from_linker(layout)
        render(layout_dot(lay), Path(output))
    except (GraphError, OutputError) as e:
        raise click.ClickException(str(e)) from None


@graph.command("cfg")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="out.svg, out.png or out.dot")
@click.option("--program", default=None, help="Program of a multi-program image.")
@click.option("--layout", default=None, help="For a router block's source: the layout (a name in microcode/layouts "
              "or a YAML file) whose link builds it.  [default: the first layout with SOURCE as a block, "
              "when SOURCE includes npk_sys.h]")
@click.option("-D", "defines", multiple=True, metavar="PARAM=VALUE", help="A parameter of that layout (as npk link -D).")
def graph_cfg(source: str, output: str, program: str | None, layout: str | None, defines: tuple[str, ...]) -> None:
    """Control-flow graph of SOURCE (.uc or an image) from its assembled words.  A router
    block's source is assembled as `npk link` assembles it for its layout (the generated
    npk_sys.h, the layout's include path and the block's defines)."""
    from npkit.toolchain.system.layout import LinkError, parse_defines

    try:
        params = parse_defines(defines)
    except LinkError as e:
        raise click.UsageError(str(e)) from None
    try:
        prog, search = _program_of(source, program, layout, params)
        render(cfg_dot(prog, search), Path(output))
    except (GraphError, OutputError) as e:
        raise click.ClickException(str(e)) from None
