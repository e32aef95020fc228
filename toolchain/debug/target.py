"""What the debugger, tracer and `npk why` run: an image, a source file or a layout.

    target = open_target("prog.elf")            # an npkit ELF image
    target = open_target("prog.uc")             # assembled on the fly
    target = open_target("pipelined.yaml")      # linked with `npk link` first

`Target` holds the chip, the image, which program is on which ME, and a SourceMap per
program.  Images go through the one loader (npkit.emulator.loader: rings, registers,
memory); traffic (`--traffic`) through the MSF device (npkit.emulator.traffic_run); a
router image's exception path is serviced as in `npk run` and `npk demo`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from npkit.asm.base.reading import load_yaml
from npkit.asm.image import Image, ImageError, Program, read_image
from npkit.emulator.binding import Chip, EmulatorError
from npkit.emulator.loader import LoadError, MeListError, load_images, parse_me_list
from npkit.emulator.me_names import format_me_list
from npkit.emulator.run_config import DEFAULT_CONFIG, run_config

from .source import SourceMap, source_maps


class TargetUsage(ValueError):
    """Options that do not go together or name nothing (--me on a layout, -D on an image,
    an ME the chip does not have): a usage error of the command."""


class TargetError(ValueError):
    """The target cannot be opened; the message says why."""


@dataclass
class Part:
    """One image of a target, as loaded: which of its programs runs on which ME, and the
    source map of each (two images may name their programs alike)."""

    label: str  # the image as the user named it
    image: Image
    loaded: dict[int, str]  # me -> program name
    maps: dict[str, SourceMap]


@dataclass
class Target:
    chip: Chip
    image: Image  # the first (or only) image: its meta says router, sysmap, packet conventions
    path: Path
    loaded: dict[int, str]  # me -> program name, every image
    maps: dict[str, SourceMap]  # the first image's, by program name
    traffic: Any = None
    notes: list[str] = field(default_factory=list)
    harness: Any = None  # npkit.toolchain.system.harness.Harness when the target is a layout
    exceptions: Any = None  # the exception path's host reader (a router image without control program)
    control: Any = None  # npkit.toolchain.system.control.ControlPlane: the image's daemon on the XScale
    parts: list[Part] = field(default_factory=list)  # every image loaded (npk debug a.uc@0 b.elf@1)
    # the same target built again from scratch, from what was read when it was opened (the
    # debugger's `back` replays the session on it); None: it cannot be (built by hand)
    reopen: Callable[[], Target] | None = None
    not_again: str = ""  # why it must not be opened a second time, when it must not ('' when it may)

    def __post_init__(self) -> None:
        if not self.parts:
            self.parts = [Part(str(self.path), self.image, self.loaded, self.maps)]

    def part(self, me: int) -> Part:
        return next(pt for pt in self.parts if me in pt.loaded)

    def program(self, me: int) -> Program:
        pt = self.part(me)
        return next(p for p in pt.image.programs if p.name == pt.loaded[me])

    def smap(self, me: int) -> SourceMap:
        pt = self.part(me)
        return pt.maps[pt.loaded[me]]

    def add_source_dirs(self, dirs: list[Path]) -> None:
        """Look for source files in `dirs` first (npk debug --source-dir)."""
        for pt in self.parts:
            for sm in pt.maps.values():
                sm.add_search(dirs)

    @property
    def mes(self) -> list[int]:
        return sorted(self.loaded)

    @property
    def label(self) -> str:
        """The target as the user named it: its path, or its images."""
        return ", ".join(pt.label for pt in self.parts) if len(self.parts) > 1 else str(self.path)

    @property
    def placements(self) -> list[str]:
        """Each image with the MEs it ran on, as the command line spells IMAGE@MES
        (`a.uc@0x00,0x01`, `router.elf@0x00-0x05,0x17`), so the same words load it again; a
        layout is its path alone (it takes no @MES: its blocks name their MEs)."""
        if self.harness is not None:
            return [str(self.path)]
        k = self.chip.me_per_cluster
        return [f"{pt.label}@{format_me_list(list(pt.loaded), k)}" if pt.loaded else pt.label for pt in self.parts]

    def ctxs(self, me: int) -> list[int]:
        return list(range(0, 8, 2)) if self.chip.ctx_mode[me] == 4 else list(range(8))

    @property
    def clock_mhz(self) -> float:
        return float(self.chip.config["clock_mhz"])

    def close(self) -> None:
        """End what runs beside the chip (the control daemon, its files); the chip and its
        devices go with the last reference to them."""
        if self.control is not None:
            self.control.close()
            self.control = None


# what `npk run`, `npk debug`, `npk trace` and `npk why` assemble rather than read
SOURCE_SUFFIXES = (".uc", ".s")

Warn = Callable[[str], None]


def _assemble(path: Path, include_dirs: Sequence[str | Path], defines: Mapping[str, str] | None,
              warn: Warn | None) -> Image:  # fmt: skip
    """`path` assembled in memory as `npk asm` assembles it (the same include directories
    and preprocessor defines); its warnings go to `warn`, an error is a TargetError with
    the assembler's file:line:column, the line and the caret."""
    from npkit.asm.assembler import assemble
    from npkit.asm.errors import AsmError, Diagnostics

    diags = Diagnostics()
    try:
        image = assemble(path, include_dirs, defines, diags=diags).image
    except AsmError as e:
        raise TargetError("\n".join([*diags.render(), str(e)])) from None
    except RecursionError:
        raise TargetError(f"{path}: nested too deeply to assemble") from None
    for line in diags.render():
        if warn is not None:
            warn(line)
    return image


def _link(path: Path) -> Image:
    """A layout linked as `npk link` links it."""
    from npkit.toolchain.system.layout import LinkError
    from npkit.toolchain.system.link import link

    try:
        return link(path)
    except LinkError as e:
        raise TargetError(f"npk link {path}: {e}") from None


def read_image_or_source(path: str | Path, include_dirs: Sequence[str | Path] = (),
                         defines: Mapping[str, str] | None = None, warn: Warn | None = None) -> Image:  # fmt: skip
    """The one way a command turns IMAGE into an Image: an npkit ELF image is read, a
    source (.uc, .s) is assembled in memory (`include_dirs`, `defines`: npk asm's -I and
    -D).  Errors are TargetErrors that name the file."""
    p = Path(path)
    if not p.exists():
        raise TargetError(f"{p}: no such file")
    if p.suffix in SOURCE_SUFFIXES:
        return _assemble(p, include_dirs, defines, warn)
    try:
        return read_image(p)
    except ImageError as e:
        raise TargetError(str(e)) from None


def read_target_image(path: str | Path, include_dirs: Sequence[str | Path] = (),
                      defines: Mapping[str, str] | None = None, warn: Warn | None = None) -> Image:  # fmt: skip
    """read_image_or_source, and a layout YAML linked as `npk link` links it."""
    p = Path(path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return _link(p)
    return read_image_or_source(p, include_dirs, defines, warn)


DEFAULT_TRAFFIC_NS = 1_000_000  # npk run's --duration-ms default


def traffic_source(spec: str | Path) -> Any:
    """The traffic of a spec or capture directory, collected, as `npk run --traffic` takes
    it: a spec that gives neither `count` nor `duration_ns` lasts npk run's default
    --duration-ms (1 ms of arrivals) instead of being refused."""
    from npkit.emulator.traffic.source import load_traffic_source

    raw = _spec_mapping(Path(spec))
    open_ended = raw is not None and raw.get("count") is None and raw.get("duration_ns") is None
    # `--app`: a spec naming no router is generated for the application's (debug.app_target.AppTraffic)
    router = getattr(spec, "router", None)
    overrides = {"router": router} if router is not None and raw is not None and raw.get("router") is None else None
    return load_traffic_source(spec, DEFAULT_TRAFFIC_NS if open_ended else None, overrides).collect()


def _spec_mapping(p: Path) -> dict[str, Any] | None:
    """A traffic spec's top-level mapping (None: not a YAML mapping)."""
    if p.is_dir() or p.suffix not in (".yaml", ".yml"):
        return None
    try:
        import yaml

        raw = yaml.safe_load(p.read_text())
    except Exception:  # noqa: BLE001 - the spec's own reader says what is wrong with it
        return None
    return raw if isinstance(raw, dict) else None


def attach_traffic(target: Target, spec: str) -> None:
    """Attach the MSF device and hand it every packet of the traffic spec (YAML) or
    capture directory up front; the device delivers each at its time."""
    from array import array

    from npkit.emulator.traffic_run import MsfError, TrafficError, TrafficRun

    try:
        tr = traffic_source(spec)
        run = TrafficRun(target.chip, tr, ahead=False)  # (collected: nothing to read ahead)
        n = len(tr)
        run.dev.push(tr.times, tr.ports, array("I", range(n)), tr.lens, b"".join(tr.frames))
        run.pushed = n
    except (MsfError, TrafficError, EmulatorError, OSError) as e:
        raise TargetError(f"--traffic {spec}: {e}") from None
    target.traffic = run
    target.notes.append(f"{n} packets from {spec} handed to the MSF")


def is_layout(p: str | Path) -> bool:
    """A layout YAML (a mapping with `blocks`), which a command links rather than loads."""
    p = Path(p)
    if p.suffix not in (".yaml", ".yml"):
        return False
    try:
        raw = load_yaml(p, what="layout").data
    except Exception:  # noqa: BLE001 - not YAML (or not a regular file): not a layout
        return False
    return isinstance(raw, dict) and "blocks" in raw


def frames_of(spec: str) -> list[tuple[int, bytes]]:
    """(in port, frame) from a traffic spec YAML (generated), a capture directory
    (port<N>.pcap, as `npk traffic gen` writes) or one pcap file (port 0)."""
    p = Path(spec)
    if p.suffix == ".pcap":
        from npkit.emulator.traffic.pcap import read_pcap

        return [(0, r.data) for r in read_pcap(p)]
    from npkit.emulator.traffic_run import TrafficError

    try:
        tr = traffic_source(spec)
    except (TrafficError, OSError) as e:
        raise TargetError(f"--traffic {spec}: {e}") from None
    return list(zip(tr.ports, tr.frames, strict=True))


MAX_INJECT = 256


def open_layout(p: Path, config: str, traffic: str | None, params: dict[str, Any] | None = None,
                xscale_gdb: int | str | None = None) -> Target:  # fmt: skip
    """Link a router layout (npkit.toolchain.system.harness.Harness: host stand-ins for the blocks
    the layout leaves external).  Traffic goes in through the receive stand-in when rx is
    external, else through the MSF device to the rx microcode."""
    from npkit.toolchain.system.harness import Harness
    from npkit.toolchain.system.layout import LinkError, load_layout

    try:
        lay = load_layout(p, params or None)
        # the layout's own defaults (e.g. io: msf, the rx/tx microcode), as `npk link` builds it;
        # -D io=host asks for the host stand-ins instead
        params = {**({"io": lay.params["io"]} if "io" in lay.params else {}), **(params or {})}
        h = Harness(p, params or None, chip_config=config)
    except (LinkError, ValueError, EmulatorError) as e:
        raise TargetError(f"npk link {p}: {e}") from None
    loaded = {me: prog.name for prog in h.image.programs for me in prog.mes}
    t = Target(h.chip, h.image, p, loaded, source_maps(h.image, p))
    t.harness = h
    progs = {prog.name for prog in h.image.programs}
    host_rx = any(f"host_{b.name}" in progs for b in lay.blocks.values() if b.ring_out and not b.ring_in)
    if traffic and host_rx:
        frames = frames_of(traffic)
        for port, frame in frames[:MAX_INJECT]:
            h.inject(frame, port)
        t.notes.append(f"injected {min(len(frames), MAX_INJECT)} of {len(frames)} frames from {traffic} "
                       "through the receive stand-in")  # fmt: skip
    elif traffic:
        attach_traffic(t, traffic)
    service_exceptions(t, xscale_gdb)
    again(t, partial(open_layout, p, config, traffic, params, xscale_gdb), xscale_gdb)
    return t


def again(t: Target, opener: Callable[[], Target], xscale_gdb: int | str | None) -> None:
    """Record how `t` is built again from scratch, and why it must not be when it must not."""
    t.reopen = opener
    if xscale_gdb is not None:
        t.not_again = (f"the control daemon waits for gdb (--xscale-gdb {xscale_gdb}): a second copy of it "
                       "cannot be started and replayed; debug without --xscale-gdb to go back")  # fmt: skip


def service_exceptions(t: Target, xscale_gdb: int | str | None = None) -> None:
    """A router image's exception path runs in debug, trace and why runs exactly as in
    `npk demo` and `npk run`: its control daemon on the XScale (co-run by every Chip.run)
    when the image names one, else the host's stand-in reader (a chip service)."""
    if "router" not in t.image.meta:
        if xscale_gdb is not None:
            raise TargetError("--xscale-gdb: the image has no control program (link a router layout)")
        return
    ctl = t.image.meta.get("control") or {}
    if ctl and ctl.get("placement") != "host":
        from npkit.toolchain.system.i3d_run import control_plane
        from npkit.toolchain.system.layout import LinkError
        from npkit.xscale.core import XScaleError

        changes = t.traffic.traffic.route_changes if t.traffic is not None else []
        try:
            t.control = control_plane(t.chip, t.image, gdb_port=xscale_gdb, changes=changes)
        except (LinkError, XScaleError, OSError) as e:
            raise TargetError(f"control program: {e}") from None
        t.notes.append(f"control plane: {ctl['program']} on the {t.control.placement} (the chip's runs co-run it)")
        return
    if xscale_gdb is not None:
        raise TargetError("--xscale-gdb: the image's control plane is the host stand-in (control: host)")
    from npkit.toolchain.system.router_run import attach_exception_reader

    t.exceptions = attach_exception_reader(t.chip, t.traffic.traffic if t.traffic is not None else None)
    t.notes.append("exception ring serviced by the host reader (frees each excepted buffer)")


Named = list[tuple[str, Image, list[int] | None]]
Items = list[tuple[str, str | None]]  # IMAGE[@MES] arguments as (path, MES text or None)


def split_image_arg(text: str, base: Path | None = None) -> tuple[str, str | None]:
    """'prog.elf@0x10,1:1' -> ('prog.elf', '0x10,1:1'); 'prog.elf' -> ('prog.elf', None)
    (a file whose name holds '@' is the file; `base` is the directory a relative name is
    in, the current one when None)."""
    path, sep, mes = text.rpartition("@")
    if not sep or not mes or ((base or Path()) / text).exists():
        return text, None
    return path, mes


def split_images(images: Sequence[str], me_list: str | None) -> Items:
    """IMAGE[@MES] arguments and --me as (path, MES text or None) per image; --me goes with
    one image that names no MEs itself (a TargetUsage otherwise)."""
    split = [split_image_arg(i) for i in images]
    if me_list is not None:
        if len(split) != 1:
            raise TargetUsage("--me goes with a single image; give several as IMAGE@MES")
        if not me_list.strip():
            raise TargetUsage("--me '': name the MEs (0x10, 1:0, 0-3), or leave --me out")
        if split[0][1] is not None:
            raise TargetUsage(f"{images[0]} names its MEs and --me {me_list} names them again: give one")
        split = [(split[0][0], me_list)]
    return split


def sort_defines(defines: Sequence[str], paths: Sequence[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """-D as `npk run`, `debug`, `trace` and `why` read it, by what they load: for a layout
    a layout parameter (NAME=VALUE, dotted paths: the linker's parser), else a preprocessor
    define for the .uc sources (NAME[=VALUE], as npk asm -D).  Returns (defines, layout
    parameters).  Malformed, or given with nothing it could apply to (ELF images only),
    it is a TargetUsage: it would otherwise be dropped without a word."""
    from npkit.asm.preprocess import parse_defines as asm_defines
    from npkit.toolchain.system.layout import DefineError
    from npkit.toolchain.system.layout import parse_defines as layout_params

    if not defines:
        return {}, {}
    if any(is_layout(p) for p in paths):  # one layout (a layout beside images is refused when opened)
        try:
            return {}, layout_params(defines)
        except DefineError as e:
            raise TargetUsage(f"{e} (a layout parameter)") from None
    if all(Path(p).is_file() and Path(p).suffix not in SOURCE_SUFFIXES for p in paths):
        what = f"{paths[0]} is an assembled image" if len(paths) == 1 else f"{', '.join(paths)} are assembled images"
        raise TargetUsage(f"-D {defines[0]}: nothing to apply it to: -D defines a preprocessor symbol for .uc "
                          f"sources or sets a layout parameter, and {what} (give the source, or assemble it "
                          "again with npk asm -D)")  # fmt: skip
    for d in defines:
        try:
            asm_defines([d])
        except ValueError:
            raise TargetUsage(f"-D {d}: expected NAME or NAME=VALUE (a preprocessor define for the .uc "
                              "sources; layout parameters go with a layout)") from None  # fmt: skip
    return asm_defines(defines), {}


def read_images(items: Sequence[tuple[str, str | None]], config: str | None, include_dirs: Sequence[str | Path] = (),
                defines: Mapping[str, str] | None = None, warn: Warn | None = None) -> tuple[str, list[str], Named]:  # fmt: skip
    """IMAGE[@MES] arguments as (path, MES text or None) read as `npk run` reads them:
    each image or source (read_image_or_source), the chip config they run on (the one
    they were linked for unless `config`; npkit.emulator.run_config) with its notes, and
    each image's MEs read on that chip.  ConfigMismatch and MeListError (LoadErrors) go
    to the caller, which says whether they are usage errors."""
    read = [(path, read_image_or_source(path, include_dirs, defines, warn), mes) for path, mes in items]
    chosen, notes = run_config([(path, img) for path, img, _ in read], config)
    return chosen, notes, [(path, img, parse_me_list(mes, chosen)) for path, img, mes in read]


def router_beside_others(named: Sequence[tuple[str, Image, Any]], traffic: bool) -> str | None:
    """The message refusing a linked router image with traffic or a control program beside
    other images (its oracle and control daemon judge the whole chip), or None."""
    judged = [label for label, img, _ in named if "router" in img.meta and (traffic or img.meta.get("control"))]
    if not judged or len(named) < 2:
        return None
    return (f"{judged[0]}: a linked router image with traffic or a control program runs alone (its oracle "
            "and control daemon judge the whole chip); put the other blocks in its layout")  # fmt: skip


def open_target(path: str | Path, config: str | None = None, mes: list[int] | None = None,
                traffic: str | None = None, image: Image | None = None,
                params: dict[str, Any] | None = None, xscale_gdb: int | str | None = None,
                me_list: str | None = None, rings: list[dict[str, Any]] | None = None,
                include_dirs: Sequence[str | Path] = (), defines: Mapping[str, str] | None = None,
                warn: Warn | None = None) -> Target:  # fmt: skip
    """The chip with `path` loaded: an image runs on the chip config it was linked for
    unless `config` names one (npkit.emulator.run_config), a layout is linked for
    `config` (default ixp2800); `me_list` names the MEs as a user writes them, read on
    that chip (when `mes` does not give them as flat indices); `rings` are scratch rings
    for a plain image (npk run --ring); a source is assembled with `include_dirs` and
    `defines` (npk asm's -I and -D)."""
    p = Path(path)
    if image is None and is_layout(p):
        if me_list is not None:
            raise TargetUsage("--me: a layout names its blocks' MEs")
        if rings:
            raise TargetUsage("--ring: a layout configures its own rings")
        return open_layout(p, config or DEFAULT_CONFIG, traffic, params, xscale_gdb)
    if params:
        raise TargetUsage("-D sets layout parameters; the target is not a layout")
    img = image if image is not None else read_target_image(p, include_dirs, defines, warn)
    try:
        chosen, notes = run_config([(str(p), img)], config)
        named = [(str(p), img, mes if mes is not None else parse_me_list(me_list, chosen))]
    except MeListError as e:
        raise TargetUsage(str(e)) from None
    except LoadError as e:
        raise TargetError(str(e)) from None
    return _load(p, chosen, notes, named, rings, traffic, xscale_gdb)


def open_targets(items: Sequence[tuple[str, str | None]], config: str | None = None, traffic: str | None = None,
                 params: dict[str, Any] | None = None, xscale_gdb: int | str | None = None,
                 rings: list[dict[str, Any]] | None = None, include_dirs: Sequence[str | Path] = (),
                 defines: Mapping[str, str] | None = None, warn: Warn | None = None) -> Target:  # fmt: skip
    """open_target for IMAGE[@MES] arguments, as (path, MES text or None): one is
    open_target; several images (or sources) are loaded one after the other by the loader
    `npk run` uses, on one record of what each holds, so the same image pairs are refused
    (an ME twice, a ring configured otherwise, memory initialised otherwise)."""
    if len(items) == 1:
        path, mes = items[0]
        return open_target(path, config, traffic=traffic, params=params, xscale_gdb=xscale_gdb, me_list=mes,
                           rings=rings, include_dirs=include_dirs, defines=defines, warn=warn)  # fmt: skip
    layouts = [path for path, _ in items if is_layout(Path(path))]
    if layouts:
        raise TargetUsage(f"{layouts[0]}: a layout runs alone; its blocks are its images (npk link it, or "
                          "put the other programs in it)")  # fmt: skip
    if params:
        raise TargetUsage("-D sets layout parameters; the targets are not a layout")
    try:
        chosen, notes, named = read_images(items, config, include_dirs, defines, warn)
    except MeListError as e:
        raise TargetUsage(str(e)) from None
    except LoadError as e:
        raise TargetError(str(e)) from None
    alone = router_beside_others([(f"{path}@{mes}" if mes else path, img, m)
                                  for (path, mes), (_, img, m) in zip(items, named, strict=True)], traffic is not None)
    if alone:
        raise TargetUsage(alone)
    return _load(Path(items[0][0]), chosen, notes, named, rings, traffic, xscale_gdb)


def _load(p: Path, chosen: str, notes: list[str], named: Named, rings: list[dict[str, Any]] | None,
          traffic: str | None, xscale_gdb: int | str | None) -> Target:  # fmt: skip
    """The chip `chosen` with every image of `named` loaded (load_images), traffic attached
    and a single router image's exception path serviced."""
    try:
        chip = Chip(chosen)
        per_image = load_images(chip, named, rings or ())
    except (EmulatorError, LoadError) as e:
        raise TargetError(str(e)) from None
    parts = [Part(label, img, loaded, source_maps(img, label)) for (label, img, _), loaded in zip(named, per_image, strict=True)]
    every = {me: name for pt in parts for me, name in pt.loaded.items()}
    t = Target(chip, parts[0].image, p, every, parts[0].maps, parts=parts)
    t.notes.extend(notes)
    if traffic:
        attach_traffic(t, traffic)
    if len(parts) == 1:
        service_exceptions(t, xscale_gdb)
    elif xscale_gdb is not None:
        raise TargetError("--xscale-gdb: several images have no control program (debug a linked router alone)")
    # the images as read now, not the files again: an edit made meanwhile changes nothing
    again(t, partial(_load, p, chosen, notes, named, rings, traffic, xscale_gdb), xscale_gdb)
    return t
