"""Fuzzing every input format: any file gives a result or the format's own error, with a
location (the file's name, and a line where the problem has one); never another exception,
and within a deadline.

Examples are mutations of the real files (lines dropped, duplicated or swapped, values
replaced by hostile ones, bytes flipped) plus random YAML built from the format's keys.
`make test` runs 150 examples a format (fixed); NPK_FUZZ_EXAMPLES=2000 runs more, new ones
each time.  Each example has a 10 s deadline.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.asm.image import ImageError, elf_bytes, from_bytes, read_image
from npkit.emulator.binding import EmulatorError, load_config
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.routes import RouteError, load_routes
from npkit.emulator.traffic.spec import SpecError, load_spec
from npkit.toolchain.debug.batch import BatchError, parse_batch
from npkit.toolchain.system.layout import LinkError, load_layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "traffic"
EXAMPLES_N = int(os.environ.get("NPK_FUZZ_EXAMPLES", "150"))
# make test: the same 150 examples a format every run (about 10 s in all); with the variable
# set, new random examples each run
FUZZ = settings(max_examples=EXAMPLES_N, deadline=10_000, derandomize="NPK_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip

HOSTILE = [
    -1, 0, 1, 17, 2**31, 2**32, 2**40, 2**64, -(2**63), 1.5, 1e-12, 1e300, float("inf"), float("nan"),
    True, False, None, "", "maybe", "x" * 300, "\u00e9", "10.0.0.1/40", "03:00:00:00:00:00",
    "0.0.0.0/0", "${nope}", "../../etc/passwd", "/dev/zero", [], [1, 2], {}, {"a": 1}, [[]],
]  # fmt: skip
scalars = st.one_of(
    st.sampled_from(HOSTILE), st.integers(), st.floats(allow_nan=True), st.text(max_size=20), st.booleans(), st.none()
)


def yaml_values(keys: list[str]) -> st.SearchStrategy[Any]:
    """Random YAML-able structures whose mapping keys are mostly the format's own."""
    key = st.one_of(st.sampled_from(keys), st.text(min_size=1, max_size=8), st.integers(0, 20))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(key, inner, max_size=5)), max_leaves=20)  # fmt: skip


def _leaf_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _leaf_paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _leaf_paths(v, (*path, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, text: str, keys: list[str]) -> bytes:
    """A real file, changed: as data (a value replaced or removed, a key added) or as text
    (lines dropped, duplicated, swapped, bytes flipped)."""
    how = draw(st.sampled_from(["value", "value", "drop", "add", "lines", "bytes", "random"]))
    if how == "random":
        return yaml.safe_dump(draw(yaml_values(keys)), allow_unicode=True).encode()
    if how in ("value", "drop", "add"):
        data = yaml.safe_load(text)
        paths = [p for p in _leaf_paths(data) if p]
        path = draw(st.sampled_from(paths))
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        if how == "value":
            parent[path[-1]] = draw(st.one_of(scalars, yaml_values(keys)))
        elif how == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(keys))] = draw(scalars)
        return yaml.safe_dump(data, allow_unicode=True).encode()
    if how == "lines":
        lines = text.splitlines()
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "dup", "swap", "indent"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(j, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines[i] = "  " + lines[i]
        return ("\n".join(lines) + "\n").encode()
    raw = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 4))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw)


def _located(err: Exception, path: Path) -> None:
    """A clear error: it names the file (and no Python internals leak into it)."""
    text = str(err)
    assert text.startswith(str(path)), text
    assert "Traceback" not in text and "object at 0x" not in text, text


def load_or_refuse(path: Path, data: bytes, load: Any, error: type[Exception]) -> Any:
    """Write `data` to `path` and load it: the result, or None after a located `error`."""
    path.write_bytes(data)
    try:
        return load(path)
    except error as e:
        _located(e, path)
        return None


def _keys(*models: Any) -> list[str]:
    from npkit.asm.base.schema import walk_models

    names: list[str] = []
    for m in models:
        for model in walk_models(m):
            names += [f.alias or n for n, f in model.model_fields.items()]
    return sorted(set(names))


# ---- chip config -----------------------------------------------------------------------------

CHIP_TEXT = (ROOT / "emulator" / "configs" / "ixp2800.yaml").read_text()


def _chip_keys() -> list[str]:
    from npkit.emulator.config_schema import ChipConfig

    return _keys(ChipConfig)


@FUZZ
@given(data=mutated(CHIP_TEXT, _chip_keys()))
def test_chip_config(tmp_path: Path, data: bytes) -> None:
    cfg = load_or_refuse(tmp_path / "chip.yaml", data, load_config, EmulatorError)
    assert cfg is None or 1 <= cfg["num_me"] <= 16 and cfg["ustore_words"] <= 8192


# ---- router config --------------------------------------------------------------------------

ROUTER_TEXT = (EXAMPLES / "router.yaml").read_text()


def _router_keys() -> list[str]:
    from npkit.emulator.traffic.router_schema import RouterConfigFile

    return [*_keys(RouterConfigFile), "10.0.0.2", "10.0.9.9"]


@FUZZ
@given(data=mutated(ROUTER_TEXT, _router_keys()))
def test_router_config(tmp_path: Path, data: bytes) -> None:
    shutil.copy(EXAMPLES / "routes.txt", tmp_path / "routes.txt")
    cfg = load_or_refuse(tmp_path / "router.yaml", data, RouterConfig.load, ConfigError)
    assert cfg is None or cfg.ports and len({p.mac for p in cfg.ports}) == len(cfg.ports)


# ---- traffic spec ---------------------------------------------------------------------------

SPEC_TEXTS = [(EXAMPLES / n).read_text() for n in ("imix.yaml", "errors.yaml", "seed003_balanced.yaml")]


def _spec_keys() -> list[str]:
    from npkit.emulator.traffic.spec_schema import MIX_KINDS, TrafficSpecFile

    return [*_keys(TrafficSpecFile), *MIX_KINDS, "imix", "choice", "uniform", "burst", "on_off", "via_port"]


@FUZZ
@given(which=st.integers(0, len(SPEC_TEXTS) - 1), data=st.data())
def test_traffic_spec(tmp_path: Path, which: int, data: st.DataObject) -> None:
    from npkit.emulator.traffic.generator import iter_packets

    raw = data.draw(mutated(SPEC_TEXTS[which], _spec_keys()))
    for name in ("router.yaml", "routes.txt"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    path = tmp_path / "spec.yaml"
    path.write_bytes(raw)
    try:
        spec = load_spec(path)
        small = (spec.count or 0) <= 200 and (spec.duration_ns or 0) <= 200_000
        if small:  # generating what it asks for stays quick: do it
            for _ in zip(range(300), iter_packets(spec), strict=False):
                pass
    except SpecError as e:
        _located(e, path)


# ---- layout ---------------------------------------------------------------------------------

LAYOUT_TEXTS = [(ROOT / "microcode" / "layouts" / n).read_text() for n in ("pipelined.yaml", "parallel.yaml")]


def _layout_keys() -> list[str]:
    from npkit.toolchain.system.layout_schema import LayoutFile

    return [*_keys(LayoutFile), "first", "count", "threads", "io", "pool_mes"]


@FUZZ
@given(which=st.integers(0, 1), data=st.data())
def test_layout(tmp_path: Path, which: int, data: st.DataObject) -> None:
    raw = data.draw(mutated(LAYOUT_TEXTS[which], _layout_keys()))
    lay = load_or_refuse(tmp_path / "layout.yaml", raw, load_layout, LinkError)
    if lay is not None:
        assert len({me for b in lay.blocks.values() for me in b.mes}) == sum(len(b.mes) for b in lay.blocks.values())


# ---- reasons file ---------------------------------------------------------------------------



def _reasons_text() -> str:
    """microcode/reasons.yaml cut to a few reasons of each kind (predicted and resource
    drops, exceptions): every field kind stays, and each example is quick to parse."""
    data = yaml.safe_load((ROOT / "microcode" / "reasons.yaml").read_text())
    drops = list(data["drops"].items())
    data["drops"] = dict(drops[:3] + [d for d in drops if "step" not in d[1]][:2])
    data["exceptions"] = dict(list(data["exceptions"].items())[:3])
    return "# reasons, cut short\n" + yaml.safe_dump(data, sort_keys=False, width=100)


REASONS_TEXT = _reasons_text()


def _reasons_keys() -> list[str]:
    from npkit.emulator.traffic.reasons_schema import ReasonsFile

    return [*_keys(ReasonsFile), "no_route", "acl_deny", "step", "code"]


def _load_reasons(path: Path) -> Any:
    from npkit.emulator.traffic.reasons import load_reasons

    return load_reasons.__wrapped__(str(path))  # not the process's cache by path: the file changes


@FUZZ
@given(data=mutated(REASONS_TEXT, _reasons_keys()))
def test_reasons_file(tmp_path: Path, data: bytes) -> None:
    from npkit.emulator.traffic.reasons import ReasonError

    reasons = load_or_refuse(tmp_path / "reasons.yaml", data, _load_reasons, ReasonError)
    if reasons is not None:  # what a valid file gives is usable: the header and the oracle's order
        header = reasons.c_header()
        assert all(r.macro in header for r in [*reasons.drops.values(), *reasons.exceptions.values()])
        steps = [r.step for r in reasons.in_order()]
        assert steps == sorted(set(steps))


# ---- route file -----------------------------------------------------------------------------

ROUTES_TEXT = (EXAMPLES / "routes.txt").read_text()
route_tokens = st.sampled_from(["10.0.0.0/8", "1.2.3.4/32", "0.0.0.0/0", "10.0.0.1/40", "10.0.0.2", "0.0.0.0",
                                "256.1.1.1", "1", "99", "-1", "#", "x", "\t", "1.2.3.0/24"])  # fmt: skip


@st.composite
def route_files(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        lines = draw(st.lists(st.lists(route_tokens, max_size=5).map(" ".join), max_size=10))
        return ("\n".join(lines) + "\n").encode()
    raw = bytearray(ROUTES_TEXT.encode())
    for _ in range(draw(st.integers(1, 4))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.sampled_from(b" ./#0123456789\n\xff"))
    return bytes(raw)


@FUZZ
@given(data=st.one_of(route_files(), st.binary(max_size=200)))
def test_route_file(tmp_path: Path, data: bytes) -> None:
    routes = load_or_refuse(tmp_path / "routes.txt", data, load_routes, RouteError)
    assert routes is None or all(0 <= r.length <= 32 for r in routes)


def test_route_file_from_dev_zero_is_refused_at_once() -> None:
    try:
        load_routes("/dev/zero")
    except RouteError as e:
        assert "/dev/zero: route file is a character device, not a regular file" in str(e)
    else:
        raise AssertionError("/dev/zero was read as a route file")


# ---- image metadata ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _image_parts() -> tuple[list[list[int]], dict[str, Any]]:
    from npkit.asm.assembler import assemble
    from npkit.asm.image import FORMAT_VERSION, _program_meta

    prog = assemble(ROOT / "examples" / "hello.uc").program
    meta = {"format": FORMAT_VERSION, "config": "", "meta": {"rings": {"r": {"ring": 1, "base": 4096, "size": 128}}},
            "programs": [_program_meta(prog)]}  # fmt: skip
    return [prog.words], json.loads(json.dumps(meta))


def _meta_keys() -> list[str]:
    from npkit.asm.image_schema import ImageMeta

    return _keys(ImageMeta)


@st.composite
def image_files(draw: st.DrawFn) -> bytes:
    words, meta = _image_parts()
    meta = json.loads(json.dumps(meta))
    if draw(st.integers(0, 4)) == 0:  # the ELF container itself, bytes flipped
        raw = bytearray(elf_bytes(words, meta, [[]], ["p"]))
        for _ in range(draw(st.integers(1, 6))):
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
        return bytes(raw)
    paths = [p for p in _leaf_paths(meta) if p]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent: Any = meta
        try:
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = draw(st.one_of(scalars, yaml_values(_meta_keys())))
        except (KeyError, IndexError, TypeError):
            continue
    try:
        return elf_bytes(words, meta, [[]], ["p"])
    except (ValueError, TypeError):  # json cannot write nan keys etc.: write the valid one
        return elf_bytes(words, _image_parts()[1], [[]], ["p"])


@FUZZ
@given(data=image_files())
def test_image_metadata(tmp_path: Path, data: bytes) -> None:
    image = load_or_refuse(tmp_path / "image.elf", data, read_image, ImageError)
    if image is not None:
        for p in image.programs:
            assert all(0 <= v < 1 << 32 for _, _, v in p.init_regs)
            assert from_bytes(data, "again").programs[0].words == p.words


# ---- debugger commands and batch files ---------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _session() -> Any:
    from npkit.toolchain.debug.session import Session
    from npkit.toolchain.debug.target import open_target

    return Session(open_target(str(ROOT / "examples" / "debug" / "ttl.uc"), "ixp2800", None, None))


words = st.sampled_from(["run", "continue", "step", "next", "break", "watch", "delete", "info", "thread",
                         "threads", "regs", "print", "signals", "mem", "rings", "queues", "packet", "list",
                         "where", "stats", "cycle", "help", "b", "p", "x", "c", "s", "n", "nosuch", ""])  # fmt: skip
args = st.one_of(
    st.sampled_from(["1", "0", "-1", "0x10", "a0", "sum", "ttl.uc:27", "ttl.uc:0", "0:0", "99:99", "sram", "dram",
                     "scratch", "1 << 99999999999", "if", "a0 == 5", "(", "'", '"', "pad", "len", "99999999999",
                     "1 << 100000", "$x", "@a5", "n$3", "*", "&&", "!", "#", "\t"]),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=12),
)  # fmt: skip
BOUNDED = {"run": 20_000, "continue": 20_000, "c": 20_000, "step": 50, "s": 50, "next": 5, "n": 5}


@st.composite
def command_lines(draw: st.DrawFn) -> str:
    word = draw(words)
    if word in BOUNDED:  # running is what these do: keep each example's run short
        return f"{word} {draw(st.integers(0, BOUNDED[word]))}"
    return " ".join([word, *draw(st.lists(args, max_size=4))])


@FUZZ
@given(lines=st.lists(command_lines(), min_size=1, max_size=4))
def test_debugger_commands(lines: list[str]) -> None:
    from npkit.toolchain.debug.session import DebugError

    session = _session()
    for line in lines:
        try:
            out = session.execute(line)
        except DebugError as e:
            assert str(e) and "Traceback" not in str(e)
        else:
            assert isinstance(out, str)


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), st.lists(command_lines(), max_size=6).map(lambda ls: "\n".join(ls).encode())))
def test_batch_files(data: bytes) -> None:
    try:
        lines = parse_batch(data, "script.npkdbg")
    except BatchError as e:
        assert re.match(r"script\.npkdbg(:\d+)?: ", str(e)), str(e)
    else:
        assert all(len(line) <= 4096 for line in lines)
