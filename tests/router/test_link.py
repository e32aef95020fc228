"""`npk link`: layouts as data -> system images; inconsistent layouts rejected with a
reason; the generated reasons header is current."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from npkit.asm.image import read_image
from npkit.toolchain.cli import main
from npkit.toolchain.system.layout import LinkError, load_layout
from npkit.toolchain.system.link import link, reasons_header
from npkit.toolchain.system.paths import REASONS_H
from npkit.toolchain.system.sysmap import SYS

LAYOUTS = Path(__file__).resolve().parents[2] / "microcode" / "layouts"


def run_snippet(src: str, inputs: dict[str, int], out: str | None = None, rings: int = 0,
                margin: int = 0, full: int | None = None) -> tuple[int, int | None]:  # fmt: skip
    """Assemble `src` and run it to its halt on ME 0, context 0, of a fresh chip: the
    registers named in `inputs` set first; `rings` scratch rings of 128 words (with
    `margin`), one word put on ring `full`.  Returns (cycles, the register `out`)."""
    from npkit.asm.assembler import assemble_text
    from npkit.asm.errors import Diagnostics
    from npkit.emulator.binding import Chip

    program = assemble_text(src, diags=Diagnostics()).program
    reg = {s.name: str(s.value) for s in program.symbols if s.kind == "reg"}
    with Chip() as chip:
        for k in range(rings):
            chip.scratch_ring(k, 0x1000 + 512 * k, 128, margin)
        if full is not None:
            chip.scratch_ring_put(full, 7)
        chip.load(0, program.words, program.ctx_mode)
        for name, value in inputs.items():
            chip.set_reg(0, reg[name], value, 0)
        chip.enable(0, 1)
        assert chip.run_until_halt(10_000) == "halted"
        return chip.cycle, (chip.reg(0, reg[out], 0) if out else None)


def test_reasons_header_is_generated_and_current() -> None:
    assert REASONS_H.read_text() == reasons_header()
    assert "#define EXC_NO_ROUTE" in REASONS_H.read_text()


@pytest.mark.parametrize(("layout", "params", "blocks"), [
    ("pipelined", {}, {"rx": [0], "parse": [1], "lookup": [2], "hdr_format": [3], "qm": [4], "tx": [5]}),
    ("pipelined", {"threads": 4, "qm": "stub", "io": "host"},
     {"parse": [1], "lookup": [2], "hdr_format": [3], "qm": [4], "host_rx": [0], "host_tx": [5]}),
    ("parallel", {"pool_mes": 6}, {"rx": [0], "fastpath": [1, 2, 3, 4, 5, 6], "qm": [14], "tx": [15]}),
    ("pipelined", {"control": "host"}, {"rx": [0], "parse": [1], "lookup": [2], "hdr_format": [3], "qm": [4],
                                        "tx": [5], "host_exceptions": [15]}),
    ("parallel", {"pool_mes": 6, "control": "host"},
     {"rx": [0], "fastpath": [1, 2, 3, 4, 5, 6], "qm": [14], "tx": [15], "host_exceptions": [13]}),
])  # fmt: skip
# the exception ring has a reader in every link: the control daemon the layout names
# (npkd on the XScale), or with `control: host` the stand-in host_exceptions on the
# highest free ME; external blocks get their host stand-ins
def test_layouts_link(layout: str, params: dict[str, Any], blocks: dict[str, list[int]]) -> None:
    image = link(layout, params)
    assert {p.name: p.mes for p in image.programs} == blocks
    threads = params.get("threads", 8)
    assert all(p.ctx_mode == threads for p in image.programs if p.name not in ("rx", "tx")
               and not p.name.startswith("host_"))  # fmt: skip
    spaces = {(space, addr) for space, addr, _ in image.programs[0].init_mem}
    assert ("sram", SYS.freelist_q) in spaces and ("sram", SYS.desc_base) in spaces
    graph = image.meta["graph"]
    assert {e["ring"] for e in graph["edges"]} == set(image.meta["rings"])
    if params.get("qm") == "stub":
        assert len(next(p for p in image.programs if p.name == "qm").words) < 100
    ctl = image.meta["control"]
    assert ctl["placement"] == params.get("control", "xscale") and ctl["ring_number"] == 12
    assert ("elf" in ctl) == (ctl["placement"] != "host")


def test_cli_writes_an_image(tmp_path: Path) -> None:
    out = tmp_path / "sys.elf"
    res = CliRunner().invoke(main, ["link", "pipelined", "-D", "threads=4", "-o", str(out)])
    assert res.exit_code == 0, res.output
    image = read_image(out)
    assert [p.ctx_mode for p in image.programs] == [8, 4, 4, 4, 4, 8]  # rx, tx: 8
    res = CliRunner().invoke(main, ["link", "pipelined", "-D", "nonsense=1", "-o", str(out)])
    assert res.exit_code == 1 and "no such parameter" in res.output


def test_cli_unwritable_output_is_one_clean_error(tmp_path: Path) -> None:
    out = tmp_path / "no" / "sys.elf"
    res = CliRunner().invoke(main, ["link", "pipelined", "-o", str(out)])
    # one error line, after the assembler's warnings (npk link prints them: issue 45)
    errors = [line for line in res.output.splitlines() if not line.startswith((" ", "/")) or "error" in line.lower()]
    assert res.exit_code == 1 and errors == [f"Error: cannot write {out}: No such file or directory"], res.output


def base() -> dict[str, Any]:
    return yaml.safe_load((LAYOUTS / "pipelined.yaml").read_text())


def broken(change: str) -> dict[str, Any]:
    lay = copy.deepcopy(base())
    b, r = lay["blocks"], lay["rings"]
    if change == "me_twice":
        b["lookup"]["mes"] = [1]
    elif change == "unknown_ring":
        b["lookup"]["out"] = "nowhere"
    elif change == "ring_number_twice":
        r["qm_to_tx"]["ring"] = 0
    elif change == "two_consumers":
        b["hdr_format"]["in"] = "parse_to_lookup"
    elif change == "threads":
        b["parse"]["threads"] = 6
    elif change == "variant":
        lay["params"]["qm"] = "fancy"
    elif change == "unknown_param":
        b["parse"]["threads"] = "${nthreads}"
    elif change == "ring_size":
        r["hdr_to_qm"]["size"] = 300
    elif change == "no_status":
        r["lookup_to_hdr"]["ring"] = 13
    elif change == "too_much_scratch":
        for ring in r.values():
            ring["size"] = 1024
    elif change == "missing_source":
        b["parse"]["source"] = "parse/nope.uc"
    elif change == "me_range":
        b["parse"]["mes"] = [16]
    return lay


@pytest.mark.parametrize(("change", "message"), [
    ("me_twice", "ME 0x01 is already used by block parse"),
    ("unknown_ring", "out ring 'nowhere' is not declared"),
    ("ring_number_twice", "both use scratch ring 0"),
    ("two_consumers", "exactly one consumer"),
    ("threads", "threads must be 4 or 8"),
    ("variant", "variant 'fancy' is not one of full, stub"),
    ("unknown_param", "unknown parameter ${nthreads}"),
    ("ring_size", "size 300 is not"),
    ("no_status", "only scratch rings 0..11 have a full flag"),
    ("too_much_scratch", "bytes of scratch"),
    ("missing_source", "source parse/nope.uc not found"),
    ("me_range", "ME 16 outside 0..15"),
])  # fmt: skip
def test_bad_layouts_are_rejected_with_a_reason(change: str, message: str) -> None:
    with pytest.raises(LinkError, match=None) as info:
        link(broken(change))
    assert message in str(info.value)


def test_fastpath_cannot_use_the_lookup_cache() -> None:
    lay = yaml.safe_load((LAYOUTS / "parallel.yaml").read_text())
    lay["blocks"]["fastpath"]["defines"] = {"LOOKUP_CAM_CACHE": True}
    with pytest.raises(LinkError, match="CAM"):
        link(lay)


def test_layout_mes_may_be_named_the_hardware_way() -> None:
    lay = yaml.safe_load((LAYOUTS / "parallel.yaml").read_text())
    lay["blocks"]["qm"]["mes"] = ["1:6"]     # cluster 1, ME 6 = 0x16 = flat 14
    lay["blocks"]["tx"]["mes"] = ["0x17"]    # flat 15
    parsed = load_layout(lay)
    assert (parsed.blocks["qm"].mes, parsed.blocks["tx"].mes) == ([14], [15])
    lay["blocks"]["tx"]["mes"] = ["0x08"]
    with pytest.raises(LinkError, match="0x00-0x07, 0x10-0x17"):
        load_layout(lay)


def test_params_substitute_typed_values() -> None:
    lay = load_layout("parallel", {"pool_mes": 3, "threads": 4})
    assert lay.blocks["fastpath"].mes == [1, 2, 3]
    assert lay.blocks["fastpath"].threads == 4


def test_control_section_spellings_and_errors() -> None:
    """`control:` names the control plane; `xscale: {program: ...}` is the same section;
    bad placements, both spellings at once, or no ring to send on are link errors."""
    lay = base()
    lay["xscale"] = lay.pop("control")
    lay["xscale"]["placement"] = "xscale"
    image = link(lay, {"io": "msf"})
    assert image.meta["control"]["program"] == "npkd" and image.meta["control"]["elf"].endswith("npkd.elf")
    assert "host_exceptions" not in {p.name for p in image.programs}
    both = base()
    both["xscale"] = dict(both["control"])
    with pytest.raises(LinkError, match="give the control plane once"):
        load_layout(both)
    bad = base()
    bad["control"]["placement"] = "moon"
    with pytest.raises(LinkError, match="control.placement"):
        load_layout(bad)
    no_ring = base()
    del no_ring["blocks"]["qm"]["control_in"]
    with pytest.raises(LinkError, match="control_in"):
        load_layout(no_ring)


@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 9])
def test_ring_hash_macro_is_hash_times_n_over_2_16(n: int) -> None:
    """rx's flow steering (split_macros' npk_ring_hash, shifts and adds/subtracts of N's
    non-adjacent form) gives ring first + (hash * N) >> 16 on the emulator in at most six
    instructions (rx runs it per frame at the edge of its budget; 7 = 8 - 1 takes five)."""
    from npkit.toolchain.system.link import split_macros

    first = 20
    macros = split_macros(list(range(first, first + n)))
    hash_macro = macros[macros.index("#macro npk_ring_hash(R, H)") : macros.index("#macro npk_ring_full(R, LABEL)")]
    assert sum(1 for line in hash_macro if line.startswith("    alu")) <= (5 if n == 7 else 6)
    src = "\n".join([*hash_macro, ".reg h r", "    npk_ring_hash(r, h)", "    halt", ""])
    for h16 in (0, 1, 0x1234, 0x5555, 0x8000, 0x9249, 0xAAAA, 0xFFFE, 0xFFFF):
        _, r = run_snippet(src, {"h": h16 << 16 | 0xBEEF}, "r")  # the hash in bits 31..16
        assert r == first + (h16 * n >> 16), (n, hex(h16))


def test_linking_twice_gives_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two links of the same inputs, uncached, are identical: the generated npk_sys.h is
    named the same in both (its temporary directory used to be in scopes, the line table
    and the source list), and a name it is known by is in the image."""
    from npkit.asm.image import to_bytes
    from npkit.toolchain.system.link import GENERATED_DIR

    monkeypatch.setenv("NPK_CACHE_DIR", "off")
    first, second = (to_bytes(link("pipelined")) for _ in range(2))
    assert first == second
    assert b"npk-link-" not in first
    assert f"{GENERATED_DIR}/npk_sys.h".encode() in first


@pytest.mark.parametrize("n", [3, 8, 9, 12])
def test_ring_full_macro_tests_the_named_ring(n: int) -> None:
    """split_macros' npk_ring_full branches when ring R is full, and only then, whichever
    of the N rings R is and whatever the others hold: a compare-and-branch chain up to
    eight rings, a binary search beyond (rx tests its ring at the edge of its budget)."""
    from npkit.toolchain.system.link import split_macros

    macros = split_macros(list(range(n)))
    full_macro = macros[macros.index("#macro npk_ring_full(R, LABEL)") :]
    src = "\n".join([*full_macro, ".reg r out", "    npk_ring_full(r, full#)", "    immed[out, 1]", "    halt",
                     "full#:", "    immed[out, 2]", "    halt", ""])  # fmt: skip
    for ring in range(n):
        for full in (ring, (ring + 1) % n):  # a margin of size - 1: one word makes a ring full
            _, out = run_snippet(src, {"r": ring}, "out", rings=n, margin=127, full=full)
            assert out == (2 if full == ring else 1), (n, ring, full)


def test_nine_pool_mes_link_with_rings_placed_largest_first() -> None:
    """The parallel layout's nine input rings leave too much alignment padding in
    ring-number order to fit in scratch, so they are placed largest first: each ring at a
    multiple of its size, none overlapping, all inside the scratch rings may use.  A
    layout that fits in number order keeps its bases (those of every image so far)."""
    image = link("parallel", {"pool_mes": 9})
    assert next(p.mes for p in image.programs if p.name == "fastpath") == list(range(1, 10))
    spans = sorted((r["base"], r["base"] + 4 * r["size"]) for r in image.meta["rings"].values())
    assert all(b % (e - b) == 0 and 0x1000 <= b and e <= 0x4000 for b, e in spans), spans
    assert all(e <= b for (_, e), (b, _) in zip(spans, spans[1:], strict=False)), spans
    four = sorted(link("parallel", {}).meta["rings"].values(), key=lambda r: r["ring"])
    assert [r["base"] for r in four] == sorted(r["base"] for r in four)


def test_ring_full_tree_is_cheaper_than_the_chain_past_eight_rings() -> None:
    """Past eight rings npk_ring_full is a binary search: on the emulator it tests a ring in
    fewer cycles on average, and in the worst case, than the compare chain would."""
    from npkit.toolchain.system.link import RING_FULL_CHAIN_MAX, _ring_full_chain, _ring_full_test

    def cycles(body: list[str], n: int) -> list[int]:
        src = "\n".join(["#macro npk_ring_full(R, LABEL)", *body, "npk_rf_done#:", "#endm", ".reg r",
                         "    npk_ring_full(r, full#)", "full#:", "    halt", ""])  # fmt: skip
        return [run_snippet(src, {"r": ring}, rings=n)[0] for ring in range(n)]

    for n in (RING_FULL_CHAIN_MAX + 1, 12):
        tree, chain = cycles(_ring_full_test(list(range(n))), n), cycles(_ring_full_chain(list(range(n))), n)
        assert sum(tree) < sum(chain) and max(tree) < max(chain), (n, tree, chain)
    assert _ring_full_test(list(range(RING_FULL_CHAIN_MAX))) == _ring_full_chain(list(range(RING_FULL_CHAIN_MAX)))
