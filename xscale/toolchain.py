"""Build C programs for the control processor: the one place the compile lines live.

ARM (placement xscale): clang (LLVM) for armv5te-linux-gnueabi, tuned for the
XScale, soft float, ARM state, linked by GNU binutils for ARM against static
glibc, with DWARF.  Native (placement gpe): the host compiler, NPK_GPE defined.
Both link xscale/lib/npk_xscale.c and see xscale/include.  xscale/Makefile
calls this module (`python -m npkit.xscale.toolchain`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
LIBSRC = HERE / "lib" / "npk_xscale.c"
SYSROOT = Path("/usr/arm-linux-gnueabi")

WARN = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
ARM = ["clang", "--target=armv5te-linux-gnueabi", "-march=armv5te", "-mtune=xscale", "-mfloat-abi=soft", "-marm",
       f"--sysroot={SYSROOT}", f"-B{SYSROOT}/bin", "-fuse-ld=bfd", "-static", "-fno-pie", "-g", "-O2",
       "-D_DEFAULT_SOURCE", "-D_FILE_OFFSET_BITS=64"]  # fmt: skip
NATIVE = [os.environ.get("CC", "cc"), "-g", "-O2", "-D_DEFAULT_SOURCE", "-DNPK_GPE"]


class BuildError(RuntimeError):
    """The compiler is missing or rejected the program (message has its output)."""


def command(sources: list[Path], out: Path, *, native: bool = False, extra: list[str] | None = None) -> list[str]:
    incs = [f"-I{INCLUDE}", *sorted({f"-I{s.parent}" for s in sources})]
    base = NATIVE if native else ARM
    return [*base, *WARN, *incs, *(extra or []), "-o", str(out), *map(str, sources), str(LIBSRC)]


def build(sources: list[str | os.PathLike[str]], out: str | os.PathLike[str], *, native: bool = False,
          extra: list[str] | None = None) -> Path:  # fmt: skip
    srcs = [Path(s) for s in sources]
    missing = [str(s) for s in srcs if not s.exists()]
    if missing:
        raise BuildError(f"no such source: {', '.join(missing)}")
    cmd = command(srcs, Path(out), native=native, extra=extra)
    if shutil.which(cmd[0]) is None:
        raise BuildError(f"{cmd[0]} is not installed: run `make` at the top of the tree")
    if not native and not (SYSROOT / "lib" / "libc.a").exists():
        raise BuildError(f"{SYSROOT}/lib/libc.a is missing (Debian libc6-dev-armel-cross): run `make`")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"{' '.join(cmd)}\n{res.stderr.strip()}")
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m npkit.xscale.toolchain")
    ap.add_argument("--native", action="store_true", help="host build (gpe placement)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("sources", nargs="+")
    a = ap.parse_args(argv)
    try:
        build(a.sources, a.output, native=a.native)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
