"""Random control stores: no crash, no hang; illegal words stop the ME with a
reason.  The Python decoder is the oracle for class-level illegality."""

from __future__ import annotations

import random

from npkit.asm.isa import isa
from npkit.emulator.binding import Chip

HALT = 0xE000020000


def test_unclassified_words_are_illegal() -> None:
    rnd = random.Random(1234)
    model = isa()
    chip = Chip("ixp2800")
    checked = 0
    while checked < 64:
        w = rnd.getrandbits(40)
        if model.classify(w) is not None:
            continue
        chip.reset()
        chip.load(0, [w, HALT])
        chip.enable(0, 1)
        chip.run(100)
        st = chip.me_status(0)
        assert st["state"] == "illegal" and st["pc"] == 0 and st["word"] == w, (hex(w), st)
        checked += 1


def test_words_the_decoder_accepts_do_not_stop_as_illegal_alu() -> None:
    # datapath words that decode cleanly execute without an illegal stop
    from npkit.asm.isa import DecodeError, decode

    rnd = random.Random(99)
    chip = Chip("ixp2800")
    checked = 0
    while checked < 64:
        w = (rnd.getrandbits(37) | (0b101 << 37))  # alu class
        try:
            decode(w)
        except DecodeError:
            continue
        chip.reset()
        chip.load(0, [w, HALT])
        chip.enable(0, 1)
        chip.run(100)
        assert chip.me_status(0)["state"] == "halt", (hex(w), decode(w), chip.me_status(0))
        checked += 1


def test_random_control_stores_run_bounded() -> None:
    rnd = random.Random(2024)
    for round_ in range(6):
        chip = Chip("ixp2800", seed=round_)
        for me in range(4):
            chip.load(me, [rnd.getrandbits(40) for _ in range(1024)], ctx_mode=8 if me % 2 == 0 else 4)
            chip.enable(me, 0xFF)
        chip.scratch_ring(2, 0x200, 128, 8)
        chip.run(300_000)
        for me in range(4):
            st = chip.me_status(me)
            assert st["state"] in ("running", "halt", "illegal", "bad_pc", "idle")
            if st["state"] == "illegal":
                assert "illegal instruction" in st["reason"]
