"""The TCAM's window as data (docs/tcam.md, microcode/include/tcam.h, npk_emu.h NPK_TCAM_*):
its layout, the defines a build gets from a chip config's `tcam:` block, an entry's bytes,
and what an SRAM address of the window is."""

from __future__ import annotations

import struct
from typing import Any

from npkit.asm.base.tcam_map import (  # noqa: F401  (the layout, one source: asm/base/tcam_map.py)
    CSR_NAMES,
    CSR_OFF,
    E_CONTROL,
    E_MASK,
    E_RESULT,
    ENTRY_BYTES,
    ENTRY_OFF,
    KEY_OFF,
    KEY_WORDS,
    RESULT_OFF,
    SLOTS,
    VALID,
    WINDOW_BYTES,
    Window,
)


def tcam_of(chip_cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The `tcam:` block of a checked chip config (load_config), None without one."""
    return chip_cfg.get("tcam") or None


def tcam_base(chip_cfg: dict[str, Any]) -> int | None:
    """The SRAM address of the window: channel << 30 | window."""
    t = tcam_of(chip_cfg)
    return None if t is None else int(t["channel"]) << 30 | int(t["window"])


def key_words(key_bits: int) -> int:
    return (key_bits + 31) // 32


def tcam_defines(chip_cfg: dict[str, Any]) -> dict[str, str]:
    """The preprocessor defines tcam.h takes from the chip config (none without a TCAM)."""
    t = tcam_of(chip_cfg)
    if t is None:
        return {}
    return {"TCAM_BASE": hex(tcam_base(chip_cfg) or 0), "TCAM_ENTRIES": str(t["entries"]),
            "TCAM_KEY_BITS": str(t["key_bits"]), "TCAM_KEY_LW": str(key_words(int(t["key_bits"])))}  # fmt: skip


def entry_bytes(key: list[int], mask: list[int], result: int, valid: bool = True) -> bytes:
    """An entry's 128 bytes as the window holds it (big-endian longwords)."""
    k = [*key, *[0] * (KEY_WORDS - len(key))]
    m = [*mask, *[0] * (KEY_WORDS - len(mask))]
    words = [*k, *m, (result >> 32) & 0xFFFFFFFF, result & 0xFFFFFFFF, VALID if valid else 0]
    return struct.pack(f">{len(words)}I", *words).ljust(ENTRY_BYTES, b"\0")


def decode_entry(raw: bytes) -> dict[str, Any]:
    """An entry's bytes: {"key": [9], "mask": [9], "result": int, "valid": bool}."""
    words = struct.unpack_from(">21I", raw)
    return {"key": list(words[:9]), "mask": list(words[9:18]), "result": words[18] << 32 | words[19],
            "valid": bool(words[20] & VALID)}  # fmt: skip


def window_of(chip_cfg: dict[str, Any]) -> Window | None:
    """The chip's TCAM window (asm/base/tcam_map.py Window: what an address of it is)."""
    t = tcam_of(chip_cfg)
    return None if t is None else Window(tcam_base(chip_cfg) or 0, int(t["entries"]))
