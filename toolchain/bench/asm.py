"""Assembler throughput: `npk bench asm` -> {"asm.lines_per_s": ...}.

Measured on a generated program with a realistic mix: .reg scopes, alu,
alu_shf, immed (some needing two words), branches, structured .if/.while,
memory commands with signals and transfer registers, and macro calls.
"""

from __future__ import annotations

import random
import time

from npkit.asm.assembler import assemble
from npkit.toolchain.bench import benchmark

_HEADER = """\
#define RING_BASE 0x40
#macro add3[d, a, b]
    alu[d, a, +, b]
    alu[d, d, +, 3]
#endm
.reg zero base
.sig gsig
    immed[zero, 0]
    immed[base, RING_BASE]
"""


def generate(lines: int, seed: int = 1) -> str:
    """A program of about `lines` source lines that assembles (and fits the control store)."""
    rng = random.Random(seed)
    out = [_HEADER]
    n = _HEADER.count("\n")
    nmacros = 0
    while n < lines * 2 // 5:  # a macro library, as IXA code includes: most of it never expanded
        nmacros += 1
        lib = [
            f"// lib_{nmacros}: library macro",
            f"#define LIB_{nmacros}_MASK 0x{rng.randrange(256):x}",
            f"#macro lib_{nmacros}[d, a, b]",
            f"    alu[d, a, and, LIB_{nmacros}_MASK]",
            "    alu_shf[d, d, or, b, <<2]",
            "    alu[d, d, +, 1]",
            "#endm",
            "",
        ]
        out.extend(lib)
        n += len(lib)
    block = 0
    while n < lines:
        block += 1
        body = [
            "",
            "/*",
            f" * block {block}: a scope with its own registers",
            " */",
            ".begin",
            "    .reg t0 t1 t2 t3",
            "    .reg read $x0 $x1",
            "    .xfer_order $x0 $x1",
            "    .sig s",
        ]
        body.append(f"b{block}#:")
        for _ in range(rng.randint(3, 6)):
            k = rng.randrange(10)
            r1, r2, r3 = (f"t{rng.randrange(4)}" for _ in range(3))
            if k == 0:
                body.append(f"    immed[{r1}, 0x{rng.randrange(1 << 32):x}]")
            elif k == 1:
                body.append(f"    immed[{r1}, {rng.randrange(1 << 16)}]")
            elif k == 2:
                body.append(f"    alu_shf[{r1}, {r2}, or, {r3}, <<{rng.randrange(1, 31)}]")
            elif k == 3:
                if nmacros and rng.randrange(2):
                    body.append(f"    lib_{rng.randint(1, nmacros)}[{r1}, {r2}, {r3}]")
                else:
                    body.append(f"    add3[{r1}, {r2}, {r3}]")
            elif k == 4:
                body.append(f"    sram[read, $x0, base, {rng.randrange(128)}, 2], sig_done[s]")
                body.append("    ctx_arb[s]")
                body.append(f"    alu[{r1}, $x0, xor, $x1]")
            elif k == 5:
                body.append(f"    .if ({r1} == {rng.randrange(256)})")
                body.append(f"        alu[{r2}, {r2}, +, 1]")
                body.append("    .else")
                body.append(f"        alu[{r2}, {r2}, -, 1]")
                body.append("    .endif")
            elif k == 6:
                body.append(f"    .while ({r1} != 0)")
                body.append(f"        alu[{r1}, {r1}, -, 1]")
                body.append("    .endw")
            elif k == 7:
                body.append(f"    alu[--, {r1}, and, 0x{rng.randrange(256):x}]")
                body.append(f"    beq[b{block}#]")
            elif k == 8:
                body.append(f"    ld_field[{r1}, 0011, {r2}, >>8]")
            else:
                body.append(f"    alu[{r1}, {r2}, and~, {r3}]   ; clear bits")
            if rng.randrange(2) == 0:
                body.append("    // " + rng.choice(("next step", "bump the count", "see the HRM")))
        body.append(".end")
        out.extend(body)
        n += len(body)
    out.append("    br[b1#]")
    return "\n".join(out) + "\n"


def measure(lines: int, repeat: int = 1) -> float:
    text = generate(lines)
    nlines = text.count("\n")
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        assemble("<bench>", source_text=text)
        best = min(best, time.perf_counter() - t0)
    return nlines / best


@benchmark("asm")
def bench_asm(quick: bool) -> dict[str, float]:
    lines = 2_000 if quick else 20_000
    return {
        "asm.lines_per_s": round(measure(lines, 1 if not quick else 2), 1),
        "asm.bench_lines": lines,
    }
