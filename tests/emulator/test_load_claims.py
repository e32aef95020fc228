"""Several images on one chip (`npk run A.elf@MES B.elf@MES`): what one image holds at load
(its MEs, scratch rings, initialised memory) a later one may share only as it is, never
overwrite; a refused image leaves the chip as it was.  The images are assembled (and
linked) here, from examples/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.asm.assembler import assemble, assemble_text
from npkit.asm.image import Image, Program, write_image
from npkit.emulator.binding import Chip
from npkit.emulator.loader import Claims, LoadError, load_image
from npkit.toolchain.commands.run import run_cmd

from .util import assemble as assemble_words

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# the rings of ring_ping.uc / ring_pong.uc (numbers from ring_pingpong.h), as `npk link` records them
RINGS = {"ping_to_pong": {"ring": 0, "base": 0x1000, "size": 128, "margin": 16},
         "pong_to_ping": {"ring": 1, "base": 0x1200, "size": 128, "margin": 16}}  # fmt: skip


def _example(name: str, rings: dict[str, Any] | None = None) -> Image:
    image = assemble(EXAMPLES / name).image
    if rings is not None:
        image.meta["rings"] = {k: dict(v) for k, v in rings.items()}
    return image


def _data(space: str, words: list[int], name: str, ring: dict[str, Any] | None = None) -> Image:
    """A program that only ends, with WORDS initialised in SPACE (at address 0, where the
    assembler puts the first allocation) and optionally a ring of its own."""
    text = f".alloc_mem table {space} {4 * len(words)}\n.init table {' '.join(map(hex, words))}\n    ctx_arb[kill]\n"
    image = assemble_text(text, f"{name}.uc", name=name).image
    if ring is not None:
        image.meta["rings"] = {f"{name}_ring": ring}
    return image


def _write(tmp_path: Path, name: str, image: Image) -> str:
    path = tmp_path / f"{name}.elf"
    write_image(path, image)
    return str(path)


def _run(*args: str) -> Any:
    return CliRunner().invoke(run_cmd, list(args))


def test_a_ring_two_images_declare_alike_is_shared_and_carries_their_messages(tmp_path: Path) -> None:
    ping = _write(tmp_path, "ping", _example("ring_ping.uc", RINGS))
    pong = _write(tmp_path, "pong", _example("ring_pong.uc", RINGS))
    res = _run(f"{ping}@0", f"{pong}@1", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["stop"] == "halted"
    assert {m["me"]: (m["program"], m["status"]) for m in out["mes"]} == {0: ("ring_ping", "halt"), 1: ("ring_pong", "halt")}
    assert out["units"]["scratch"][0]["commands"] > 2 * 10  # the counter went round through both rings


def test_a_shared_ring_is_configured_once() -> None:
    """The consumer's image must not configure the producer's ring again: that empties it."""
    chip, claims = Chip("ixp2800"), Claims()
    load_image(chip, _example("ring_ping.uc", RINGS), [0], claims=claims, label="ping.elf")
    assert chip.scratch_ring_put(1, 7)  # already waiting for ring_ping when ring_pong is loaded
    load_image(chip, _example("ring_pong.uc", RINGS), [1], claims=claims, label="pong.elf")
    assert chip.scratch_ring_info(1) == {"base": 0x1200, "size": 128, "full_margin": 16, "count": 1}
    assert chip.scratch_ring_get(1) == 7
    assert claims.mes == {0: "ring_ping", 1: "ring_pong"}


def test_a_ring_two_images_configure_differently_is_refused(tmp_path: Path) -> None:
    ping = _write(tmp_path, "ping", _example("ring_ping.uc", RINGS))
    other = {**RINGS, "pong_to_ping": {"ring": 1, "base": 0x1400, "size": 256, "margin": 16}}
    pong = _write(tmp_path, "pong", _example("ring_pong.uc", other))
    res = _run(f"{ping}@0", f"{pong}@1")
    assert res.exit_code == 1, res.output
    assert (f"scratch ring 1 is configured differently by pong_to_ping (ring 1, scratch 0x1400..0x17ff) of {pong} "
            f"and pong_to_ping (ring 1, scratch 0x1200..0x13ff) of {ping} (base 0x1400 vs 0x1200, size 256 vs 128)"
            ) in res.output  # fmt: skip
    assert "Traceback" not in res.output
    margin = {**RINGS, "pong_to_ping": {**RINGS["pong_to_ping"], "margin": 2}}
    res = _run(f"{ping}@0", _write(tmp_path, "pong2", _example("ring_pong.uc", margin)) + "@1")
    assert res.exit_code == 1 and "(margin 2 vs 16)" in res.output, res.output


def test_rings_of_two_images_that_overlap_are_refused(tmp_path: Path) -> None:
    ping = _write(tmp_path, "ping", _example("ring_ping.uc", RINGS))
    pong_rings = {"pong_to_ping": RINGS["pong_to_ping"], "extra": {"ring": 2, "base": 0xF00, "size": 128}}
    pong = _write(tmp_path, "pong", _example("ring_pong.uc", pong_rings))
    res = _run(f"{ping}@0", f"{pong}@1")
    assert res.exit_code == 1, res.output
    assert (f"extra (ring 2, scratch 0xf00..0x10ff) of {pong} overlaps "
            f"ping_to_pong (ring 0, scratch 0x1000..0x11ff) of {ping}") in res.output  # fmt: skip


def test_command_line_rings_are_checked_against_every_image(tmp_path: Path) -> None:
    ping = _write(tmp_path, "ping", _example("ring_ping.uc"))  # no rings of its own
    pong = _write(tmp_path, "pong", _example("ring_pong.uc", RINGS))
    res = _run(f"{ping}@0", f"{pong}@1", "--ring", "scratch:1:base=0x2000,size=128")
    assert res.exit_code == 1, res.output
    assert ("scratch ring 1 is configured differently by pong_to_ping (ring 1, scratch 0x1200..0x13ff) of "
            f"{pong} and --ring 'scratch:1:base=0x2000,size=128' (ring 1, scratch 0x2000..0x21ff) "
            "(base 0x1200 vs 0x2000, margin 16 vs 0)") in res.output  # fmt: skip
    # the same rings given on the command line: shared
    same = [a for r in RINGS.values() for a in ("--ring", f"scratch:{r['ring']}:base={r['base']},size=128,margin=16")]
    res = _run(f"{ping}@0", f"{pong}@1", *same, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["stop"] == "halted", res.output


def test_memory_two_images_initialise_differently_is_refused(tmp_path: Path) -> None:
    a = _write(tmp_path, "a", _data("sram", [1, 2, 3, 4], "a"))
    b = _write(tmp_path, "b", _data("sram", [1, 2, 0x300, 4], "b"))
    res = _run(f"{a}@0", f"{b}@1")
    assert res.exit_code == 1, res.output
    assert (f"sram 0x0..0xf is initialised by both {a} (program 'a') and {b} (program 'b'), with different "
            "bytes (at 0xa: 0x00, then 0x03)") in res.output  # fmt: skip


def test_memory_two_images_initialise_alike_is_fine(tmp_path: Path) -> None:
    words = [0x11223344, 0x55667788]
    a, b = _data("dram", words, "a"), _data("dram", words + [9], "b")
    chip, claims = Chip("ixp2800"), Claims()
    load_image(chip, a, [0], claims=claims)
    load_image(chip, b, [1], claims=claims)
    assert chip.mem_read("dram", 0, 12) == bytes.fromhex("11223344556677880000" "0009")
    res = _run(_write(tmp_path, "a", a) + "@0", _write(tmp_path, "b", b) + "@1", "--cycles", "100")
    assert res.exit_code == 0, res.output


def test_a_ring_over_another_images_scratch_data_is_refused(tmp_path: Path) -> None:
    data = _write(tmp_path, "data", _data("scratch", [5, 6, 7, 8], "data"))
    ringed = _write(tmp_path, "ringed", _data("sram", [1], "ringed", {"ring": 4, "base": 0x8, "size": 128}))
    res = _run(f"{data}@0", f"{ringed}@1")
    assert res.exit_code == 1, res.output
    assert (f"ringed_ring (ring 4, scratch 0x8..0x207) of {ringed} overlaps the scratch data 0x0..0xf "
            f"that {data} (program 'data') initialises") in res.output  # fmt: skip
    res = _run(f"{ringed}@1", f"{data}@0")  # the other way round
    assert res.exit_code == 1, res.output
    assert (f"{data} (program 'data') initialises scratch 0x0..0xf, which overlaps "
            f"ringed_ring (ring 4, scratch 0x8..0x207) of {ringed}") in res.output  # fmt: skip


def test_a_refused_image_leaves_the_chip_as_it_was() -> None:
    """pong's image shares ping's rings but initialises SRAM differently: refused, and
    nothing of it written (the old loader configured its rings and loaded its ME first)."""
    ping = _example("ring_ping.uc", RINGS)
    ping.programs[0].init_mem.append(("sram", 0x100, bytes(range(16))))
    pong = _example("ring_pong.uc", RINGS)
    pong.programs[0].init_mem.append(("sram", 0x108, bytes(8)))
    chip, claims = Chip("ixp2800"), Claims()
    load_image(chip, ping, [0], claims=claims, label="ping.elf")
    assert chip.scratch_ring_put(0, 0x55)
    with pytest.raises(LoadError, match=r"sram 0x108..0x10f is initialised by both ping.elf \(program 'ring_ping'\) "
                                        r"and pong.elf \(program 'ring_pong'\)"):  # fmt: skip
        load_image(chip, pong, [1], claims=claims, label="pong.elf")
    assert chip.scratch_ring_info(0) == {"base": 0x1000, "size": 128, "full_margin": 16, "count": 1}
    assert chip.mem_read("sram", 0x100, 16) == bytes(range(16))
    assert chip.me_status(1)["state"] == "idle" and chip.me_status(1)["reason"] == "no context enabled"
    assert claims.mes == {0: "ring_ping"} and len(claims.memory) == 1 and set(claims.rings) == {0, 1}
    # what the refused image asked for was checked before it was written: a good one loads after
    load_image(chip, _example("ring_pong.uc", RINGS), [1], claims=claims, label="pong.elf")
    assert chip.run(100_000) == "halted"


def _signaller(me: int) -> Image:
    """A program whose initial registers signal the next ME's context 2 (signal 3) at load."""
    words = assemble_words(["ctx_arb[kill]"])
    return Image(programs=[Program(name="nn", words=words, mes=[me],
                                   init_regs=[("NEXT_NEIGHBOR_SIGNAL", 0, (3 << 3) | 2)])])  # fmt: skip


def test_a_load_time_signal_into_another_images_me_is_refused() -> None:
    chip = Chip("ixp2800")
    load_image(chip, _signaller(0))
    assert chip.reg(1, "signals", ctx=2) == 1 << 3  # the write reaches ME 1 at load
    other = Image(programs=[Program(name="other", words=assemble_words(["ctx_arb[kill]"]), mes=[1])])
    for first, second, message in ((_signaller(0), other, "would be loaded on an ME that program 'nn'"),
                                   (other, _signaller(0), "ME 0x01 holds program 'other'")):  # fmt: skip
        chip, claims = Chip("ixp2800"), Claims()
        load_image(chip, first, claims=claims)
        with pytest.raises(LoadError, match=message):
            load_image(chip, second, claims=claims)


def test_linked_images_share_rings_and_tables_but_not_different_tables(tmp_path: Path) -> None:
    """Two linked images (`npk link`): the same layout twice, one block from each, run as
    one; linked with another route file, their SRAM tables differ and are refused."""
    from npkit.toolchain.system.link import link

    layout = EXAMPLES / "ring_pingpong.yaml"
    pp = _write(tmp_path, "pp", link(layout))
    res = _run(f"{pp}@0", f"{pp}@1", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["stop"] == "halted" and [m["status"] for m in out["mes"]] == ["halt", "halt"]
    routes = tmp_path / "one.txt"
    routes.write_text("1.0.0.0/8 10.0.0.2 0\n")
    other = _write(tmp_path, "other", link(layout, routes=routes))
    res = _run(f"{pp}@0", f"{other}@1")
    assert res.exit_code == 1, res.output
    assert f"is initialised by both {pp} (program 'ping') and {other} (program 'ping'), with different bytes" in res.output


def test_a_router_image_with_a_control_program_or_traffic_runs_alone(tmp_path: Path) -> None:
    """Beside another image a linked router used to lose its control daemon and oracle
    without a word; now `npk run` refuses the pair (usage error, exit 2)."""
    from npkit.toolchain.system.link import link

    pp = _write(tmp_path, "pp", link(EXAMPLES / "ring_pingpong.yaml"))
    router = _write(tmp_path, "router", link("pipelined"))
    hello = _write(tmp_path, "hello", _example("hello.uc"))
    res = _run(f"{router}@0-13", f"{hello}@15")
    assert res.exit_code == 2, res.output
    assert f"{router}@0-13: a linked router image with traffic or a control program runs alone" in res.output
    res = _run(f"{pp}@0", f"{pp}@1", "--traffic", str(EXAMPLES / "passthrough" / "min64.yaml"))
    assert res.exit_code == 2 and f"{pp}@0: a linked router image" in res.output, res.output


def _allocating(name: str, decls: str, init: str = "") -> Image:
    """A program that only ends, with `decls` (.alloc_mem lines) and `init` (.init lines)."""
    return assemble_text(f"{decls}\n{init}\n    ctx_arb[kill]\n", f"{name}.uc", name=name).image


def test_memory_two_images_allocate_without_initialising_is_refused(tmp_path: Path) -> None:
    """Both programs' first allocation lands at 0: two buffers in one area, which the old
    loader let through (nothing initialised, nothing to compare)."""
    a = _write(tmp_path, "a", _allocating("a", ".alloc_mem buf sram 64"))
    b = _write(tmp_path, "b", _allocating("b", ".alloc_mem table sram 128"))
    res = _run(f"{a}@0", f"{b}@1", "--cycles", "100")
    assert res.exit_code == 1, res.output
    assert (f"sram 0x0..0x3f is allocated by both {a} (program 'a'): buf, 0x0..0x3f and {b} (program 'b'): "
            "table, 0x0..0x7f; each program places its allocations from address 0") in res.output  # fmt: skip
    # declaring a's buffer first (alike: shared) puts c's table after it: apart, fine
    apart = _write(tmp_path, "c", _allocating("c", ".alloc_mem buf sram 64\n.alloc_mem table sram 128"))
    res = _run(f"{a}@0", f"{apart}@1", "--cycles", "100")
    assert res.exit_code == 0, res.output
    # other spaces, and local memory (each ME's own), do not meet
    d = _write(tmp_path, "d", _allocating("d", ".alloc_mem buf dram 64\n.local_mem lm 64"))
    e = _write(tmp_path, "e", _allocating("e", ".local_mem lm 128"))
    res = _run(f"{a}@0", f"{d}@1", f"{e}@2", "--cycles", "100")
    assert res.exit_code == 0, res.output


def test_memory_allocated_alike_is_shared() -> None:
    """The same allocation (name, address, size) in two programs is one area they share,
    as the same ring is; initialised alike by both, areas may also differ in size."""
    chip, claims = Chip("ixp2800"), Claims()
    load_image(chip, _allocating("a", ".alloc_mem q scratch 256"), [0], claims=claims)
    load_image(chip, _allocating("b", ".alloc_mem q scratch 256"), [1], claims=claims)
    with pytest.raises(LoadError, match=r"scratch 0x0..0xff is allocated by both .*'a'\): q, 0x0..0xff and "
                                        r".*'c'\): q, 0x0..0x1ff"):  # fmt: skip
        load_image(chip, _allocating("c", ".alloc_mem q scratch 512"), [2], claims=claims)
    with pytest.raises(LoadError, match=r"allocated by both .*'a'\): q, 0x0..0xff and .*'d'\): r, 0x0..0xff"):
        load_image(chip, _allocating("d", ".alloc_mem r scratch 256"), [3], claims=claims)


def test_memory_allocated_over_and_initialised_alike_by_both_is_fine() -> None:
    chip, claims = Chip("ixp2800"), Claims()
    load_image(chip, _allocating("a", ".alloc_mem t sram 8", ".init t 1 2"), [0], claims=claims)
    # u covers t's 8 bytes with the same values: the overlap is initialised alike
    load_image(chip, _allocating("b", ".alloc_mem u sram 12", ".init u 1 2 3"), [1], claims=claims)
    # v initialises only its first longword: the rest of the overlap is left to chance
    with pytest.raises(LoadError, match=r"sram 0x0..0x7 is allocated by both"):
        load_image(chip, _allocating("c", ".alloc_mem v sram 8", ".init v 1"), [2], claims=claims)
