"""Build C programs for the control processor: the one place the compile lines live.

ARM (placement xscale): clang (LLVM) for armv5te-linux-gnueabi, tuned for the
XScale, soft float, ARM state, linked by GNU binutils for ARM against static
glibc, with DWARF.  Native (placement gpe): the host compiler, NPK_GPE defined.
Both link xscale/lib/npk_xscale.c and see xscale/include.  xscale/Makefile
calls this module (`python -m npkit.xscale.toolchain`).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
LIBSRC = HERE / "lib" / "npk_xscale.c"
SYSROOT = Path("/usr/arm-linux-gnueabi")
BUILD = HERE / "build"
# programs known by name: a directory of C sources or one source file
PROGRAMS = {"npkd": HERE / "npkd", "i3d": HERE / "i3d", "xs_demo": HERE.parent / "examples" / "xscale" / "xs_demo.c"}

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


def sources_of(spec: str | os.PathLike[str]) -> list[Path]:
    """The C sources of a program: a name in PROGRAMS, a directory (its *.c) or .c files."""
    p = PROGRAMS.get(str(spec), Path(spec))
    if p.is_dir():
        return sorted(p.glob("*.c"))
    return [p]


def _shared(files: list[Path]) -> list[Path]:
    """Files of another folder a program's sources include ("../npkd/ctl.c": i3d compiles
    npkd's control socket in), one level deep."""
    out: list[Path] = []
    for f in files:
        if f.exists():
            for name in re.findall(r'#include "(\.\./[^"]+)"', f.read_text(errors="replace")):
                out.append((f.parent / name).resolve())
    return out


def _inputs(srcs: list[Path]) -> list[Path]:
    dirs = {s.parent for s in srcs}
    own = [*srcs, *(h for d in dirs for h in d.glob("*.h"))]
    shared = _shared(own)
    return [*own, *shared, *_shared(shared), LIBSRC, *INCLUDE.glob("*.h"), Path(__file__)]


def program_digest(spec: str | os.PathLike[str]) -> str:
    """What a program is built from, cheaply: name, size and modification time of every
    input (a built executable: of itself) -- for caches of what records the program."""
    import hashlib

    p = PROGRAMS.get(str(spec), Path(spec))
    files = [p] if p.is_file() and p.suffix != ".c" else _inputs(sources_of(spec))
    h = hashlib.sha256()
    for f in files:
        st = f.stat() if f.exists() else None
        h.update(f"{f}\0{st.st_size if st else -1}\0{st.st_mtime_ns if st else -1}\n".encode())
    return h.hexdigest()


def program(spec: str | os.PathLike[str], *, native: bool = False) -> Path:
    """An XScale program ready to run: a built executable as given, or C sources (a name
    in PROGRAMS such as "npkd", a directory, a .c file) built into xscale/build/arm (or
    gpe for native) when missing or older than a source (cached; concurrent callers
    wait for one build)."""
    p = PROGRAMS.get(str(spec), Path(spec))
    if p.is_file() and p.suffix != ".c":
        return p
    srcs = sources_of(spec)
    missing = [str(s) for s in srcs if not s.exists()]
    if not srcs or missing:
        raise BuildError(f"XScale program {spec}: no such source {', '.join(missing) or 'files'}")
    name = p.stem if p.is_file() else p.name
    out = BUILD / ("gpe" if native else "arm") / (name if native else f"{name}.elf")
    out.parent.mkdir(parents=True, exist_ok=True)

    def fresh() -> bool:
        return out.exists() and out.stat().st_mtime >= max(f.stat().st_mtime for f in _inputs(srcs) if f.exists())

    if fresh():
        return out
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not fresh():
            tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
            build(srcs, tmp, native=native)
            os.replace(tmp, out)
    return out


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
