"""Issue 48, "Inputs that exhaust the machine or leak", each item as it was seen:

- `npk asm /dev/zero` (and /dev/urandom) grew without bound: every input of every command
  must be a regular file, refused otherwise before a byte is read;
- a FIFO given as an input (`--config`, ...) hung for ever;
- a 5,000-digit integer in any YAML (or JSON) input ended in a traceback or an error
  without file:line;
- an experiment design whose level makes the chip config invalid named a temporary
  `chip.yaml:29`, not the design;
- `#include "/etc/shadow"` echoed the file's first line in its error.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.asm.assembler import assemble
from npkit.asm.errors import AsmError
from npkit.asm.image import ImageError, elf_bytes, from_bytes, write_image
from npkit.emulator.binding import EmulatorError, load_config
from npkit.emulator.traffic.dataset import DatasetError, load_manifest, read_dispositions
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.spec import SpecError, load_spec
from npkit.toolchain.cli import main
from npkit.toolchain.debug.ring_schema import read_ring_file
from npkit.toolchain.debug.why import WhyError, _from_run_dir
from npkit.toolchain.experiment.design import DesignError, load_design
from npkit.toolchain.experiment.store import StoreError, read_json
from npkit.toolchain.system.layout import LinkError, load_layout

from .test_fuzz_formats import _leaf_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRAFFIC = EXAMPLES / "traffic"
FIFO_MESSAGE = "is a FIFO (named pipe), not a regular file"


# ---- endless devices --------------------------------------------------------------------------


def _limit_memory() -> None:  # in the child: a run that reads on without end fails at 1.5 GB
    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_asm_of_an_endless_device_is_refused_before_reading(device: str) -> None:
    out = subprocess.run([sys.executable, "-c", "from npkit.toolchain.cli import main; main()", "asm", device],
                         capture_output=True, text=True, timeout=300, preexec_fn=_limit_memory)  # fmt: skip
    assert out.returncode == 1, out.stderr[-2000:]
    assert f"{device}:1:1: error: cannot read '{device}': source is a character device, not a regular file" \
        in out.stderr, out.stderr[-2000:]  # fmt: skip
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr


def test_null_device_stays_an_empty_input(tmp_path: Path) -> None:
    """`--batch /dev/null` (no commands) is an idiom: the null device reads as empty."""
    res = CliRunner().invoke(main, ["debug", str(EXAMPLES / "hello.uc"), "--batch", os.devnull])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output


# ---- FIFOs ------------------------------------------------------------------------------------


@contextmanager
def _unblocked(fifos: list[Path], every_s: float = 2.0) -> Iterator[list[Path]]:
    """While the block runs, open each FIFO for writing every few seconds and close it: a
    reader blocked on one (the defect) then sees an empty file instead of hanging the
    test for ever.  Yields the list of FIFOs that had a reader waiting (a writer's open
    succeeds only then): it must stay empty."""
    done = threading.Event()
    waited: list[Path] = []

    def loop() -> None:
        while not done.wait(every_s):
            for f in fifos:
                try:
                    os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    continue  # no reader: nothing waits on it
                waited.append(f)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield waited
    finally:
        done.set()
        t.join()


@pytest.fixture(scope="module")
def fifos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fifos")
    for name in ("fifo", "fifo.yaml", "fifo.uc", "fifo.elf"):
        os.mkfifo(d / name)
    (d / "cap").mkdir()
    os.mkfifo(d / "cap" / "port0.pcap")
    write_image(d / "hello.elf", assemble(EXAMPLES / "hello.uc").image)
    return d


# Every command that reads a file the user names, with a FIFO in that place ({d}: the
# fixture's directory; {t}: examples/traffic).
FIFO_COMMANDS = [
    "asm {d}/fifo.uc", "disasm {d}/fifo", "run {d}/fifo.elf",
    "run {d}/hello.elf --config {d}/fifo.yaml", "run {d}/hello.elf --ring {d}/fifo.yaml",
    "run {d}/hello.elf --traffic {d}/fifo.yaml", "run {d}/hello.elf --traffic {d}/cap",
    "demo --config {d}/fifo.yaml", "demo --layout {d}/fifo.yaml", "demo --routes {d}/fifo",
    "demo --traffic {d}/fifo.yaml",
    "link pipelined --routes {d}/fifo -o {d}/o.elf", "link pipelined --router-config {d}/fifo -o {d}/o.elf",
    "link {d}/fifo.yaml -o {d}/o.elf", "link pipelined --config {d}/fifo.yaml -o {d}/o.elf",
    "traffic gen {d}/fifo -o {d}/g", "traffic show {d}/cap", "traffic show {t}/min64.yaml --config {d}/fifo",
    "traffic predict {d}/cap --config {t}/router.yaml -o {d}/p",
    "debug {d}/hello.elf --batch {d}/fifo", "experiment design {d}/fifo.yaml", "formats --check {d}/fifo",
    "xscale run {d}/fifo",
]  # fmt: skip


@pytest.mark.parametrize("command", FIFO_COMMANDS)
def test_a_fifo_as_any_input_is_refused_not_waited_on(fifos: Path, command: str) -> None:
    args = command.format(d=fifos, t=TRAFFIC).split()
    with _unblocked([*fifos.glob("fifo*"), fifos / "cap" / "port0.pcap"]) as waited:
        res = CliRunner().invoke(main, args)
    assert not waited, f"the command waited on {waited}"
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (1, 2) and FIFO_MESSAGE in res.output, res.output
    assert "Traceback" not in res.output


# ---- huge integers in every YAML and JSON input -------------------------------------------------

MARK = "hugeintegermark"  # a plain string put where the integer goes, then replaced in the text


def _put(data: Any, path: tuple[Any, ...], as_key: bool) -> None:
    parent = data
    for k in path[:-1]:
        parent = parent[k]
    if as_key and isinstance(parent, dict):
        parent[MARK] = parent.pop(path[-1])
    else:
        parent[path[-1]] = MARK


@st.composite
def huge_integers(draw: st.DrawFn, key: bool = False) -> str:
    """An integer literal too long for any format: decimal past Python's 4,300-digit
    conversion limit, or merely long, signed, hexadecimal or with underscores (as a
    key, at most 1,024 characters: YAML's limit for a plain key)."""
    digits = draw(st.sampled_from([101, 300] if key else [5000, 4301, 101, 300]))
    body = draw(st.sampled_from(["1", "9", "7"])) * digits
    form = draw(st.sampled_from(["plain", "minus", "plus", "hex", "underscore"]))
    return {"plain": body, "minus": "-" + body, "plus": "+" + body, "hex": "0x" + "f" * digits,
            "underscore": "1_" + body}[form]  # fmt: skip


def _with_huge(data: Any, draw: st.DrawFn, as_json: bool) -> tuple[str, int]:
    """`data` as text with a huge integer at a random value (or key) of it, and its line."""
    data = json.loads(json.dumps(data))
    path = draw(st.sampled_from([p for p in _leaf_paths(data) if p]))
    as_key = not as_json and draw(st.integers(0, 4)) == 0
    _put(data, path, as_key)
    text = json.dumps(data, indent=1) if as_json else yaml.safe_dump(data, sort_keys=False, width=1 << 20)
    literal = draw(huge_integers(as_key)) if not as_json else draw(st.sampled_from(["1" * 5000, "-" + "9" * 4301, "7" * 101]))
    needle = f'"{MARK}"' if as_json else MARK
    assert text.count(needle) == 1, text
    line = text[: text.index(needle)].count("\n") + 1
    return text.replace(needle, literal), line


Loader = Callable[[Path], Any]


def _design(tmp: Path) -> Path:
    text = (EXAMPLES / "experiments" / "screening.yaml").read_text()
    return _written(tmp / "design_src.yaml", text.replace("../traffic/", f"{TRAFFIC}/"))


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _run_dir_file(p: Path) -> Any:
    return _from_run_dir(p.parent, None, None, 0, None)


def _in_dir(load: Callable[[Path], Any]) -> Loader:
    return lambda p: load(p.parent)


FILE_NAMES = {"run.json": "run.json", "traffic manifest": "manifest.json", "dispositions": "dispositions.json"}


# kind -> (a valid example's data, its loader, the loader's error, JSON or not)
KINDS: dict[str, tuple[Callable[[Path], Any], Loader, type[Exception], bool]] = {
    "chip config": (lambda t: yaml.safe_load((ROOT / "emulator/configs/ixp2800.yaml").read_text()),
                    load_config, EmulatorError, False),
    "router config": (lambda t: yaml.safe_load((TRAFFIC / "router.yaml").read_text()),
                      RouterConfig.load, ConfigError, False),
    "traffic spec": (lambda t: yaml.safe_load((TRAFFIC / "imix.yaml").read_text()), load_spec, SpecError, False),
    "layout": (lambda t: yaml.safe_load((ROOT / "microcode/layouts/pipelined.yaml").read_text()),
               load_layout, LinkError, False),
    "ring file": (lambda t: yaml.safe_load((EXAMPLES / "ring_pingpong.rings.yaml").read_text()),
                  lambda p: read_ring_file(str(p), ValueError), ValueError, False),
    "experiment design": (lambda t: yaml.safe_load(_design(t).read_text()), load_design, DesignError, False),
    "run.json": (lambda t: {"image": str(EXAMPLES / "hello.uc"), "cycles": 5000, "buffer": "0:64"},
                 _run_dir_file, WhyError, True),
    "run record": (lambda t: {"run_id": "p0r0", "point": 0, "replicate": 0, "seed": 1, "levels": {"A": "1"},
                              "status": "ok", "config_hash": "abc"},
                   lambda p: read_json(p, "run record", ("run_id",)), StoreError, True),
    "traffic manifest": (lambda t: {"duration_ns": 1000, "ports": [{"port": 0, "packets": 3}]},
                         _in_dir(load_manifest), DatasetError, True),
    "dispositions": (lambda t: {"offered": 3, "drops": [{"id": 1, "reason": "ttl"}], "exceptions": []},
                     _in_dir(read_dispositions), DatasetError, True),
}  # fmt: skip
HUGE = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip


@HUGE
@given(kind=st.sampled_from(sorted(KINDS)), data=st.data())
def test_a_huge_integer_anywhere_in_any_input_is_a_located_error(tmp_path: Path, kind: str,
                                                                 data: st.DataObject) -> None:  # fmt: skip
    example, load, error, as_json = KINDS[kind]
    for name in ("router.yaml", "routes.txt"):  # what the example traffic spec names
        shutil.copy(TRAFFIC / name, tmp_path / name)
    text, line = _with_huge(example(tmp_path), data.draw, as_json)
    path = _written(tmp_path / FILE_NAMES.get(kind, "input.json" if as_json else "input.yaml"), text)
    with pytest.raises(error) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and "is too long (at most 100)" in message, (kind, message)
    assert "Traceback" not in message and "set_int_max_str_digits" not in message, message


def test_a_huge_integer_in_image_metadata_is_an_image_error() -> None:
    prog = assemble(EXAMPLES / "hello.uc").program
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # to write the image's JSON with the integer in it
    try:
        data = elf_bytes([prog.words], {"format": int("1" * 5000), "config": "", "meta": {}, "programs": []},
                         [[]], ["p"])  # fmt: skip
    finally:
        sys.set_int_max_str_digits(limit)
    with pytest.raises(ImageError, match=r"^img: \.npk\.meta:1: an integer of 5,000 characters is too long"):
        from_bytes(data, "img")


@pytest.mark.parametrize("args", [
    ["traffic", "gen", "{spec}", "-o", "{tmp}/out"],
    ["demo", "--traffic", "{spec}", "--ms", "0.01"],
])  # fmt: skip
def test_traffic_gen_and_demo_with_a_huge_seed_name_the_line(tmp_path: Path, args: list[str]) -> None:
    for name in ("router.yaml", "routes.txt"):
        shutil.copy(TRAFFIC / name, tmp_path / name)
    spec = tmp_path / "spec.yaml"
    spec.write_text((TRAFFIC / "min64.yaml").read_text().replace("seed: 1\n", f"seed: {'1' * 5000}\n"))
    res = CliRunner().invoke(main, [a.format(spec=spec, tmp=tmp_path) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 1, res.output
    assert f"{spec}:5: seed: an integer of 5,000 characters is too long" in res.output, res.output


# ---- experiment design: a level that makes the chip config invalid ------------------------------


def test_a_scale_level_that_breaks_the_chip_config_names_the_design_line(tmp_path: Path) -> None:
    design = _design(tmp_path)
    text = design.read_text().replace("scale: true, levels: [1, 2]}", "scale: true, levels: [-2, 2]}")
    design.write_text(text)
    line = next(n for n, s in enumerate(text.splitlines(), 1) if "levels: [-2, 2]" in s)
    with pytest.raises(DesignError) as info:
        load_design(design)
    message = str(info.value)
    assert message.startswith(f"{design}:{line}: factors.E.levels: the run with "), message
    assert "E=-2: chip config: units.dram.read_latency: must be in 0..2^32-1, got -400" in message, message
    assert "chip.yaml" not in message and "npk-check" not in message, message
    res = CliRunner().invoke(main, ["experiment", "design", str(design)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 1 and f"{design}:{line}: factors.E.levels" in res.output, res.output


# ---- #include of a file that is not source --------------------------------------------------------


def test_include_of_a_file_that_is_not_source_never_shows_its_lines(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:s3cr3t:20228:0:99999:7:::\n")
    (tmp_path / "link.h").symlink_to(secret)  # a source name pointing at another file
    for target in (str(secret), "link.h"):
        src = tmp_path / "main.uc"
        src.write_text(f'#include "{target}"\nnop\n')
        with pytest.raises(AsmError) as info:
            assemble(src)
        err = info.value
        assert "not microcode source (only .uc/.h files are included)" in err.message, err.message
        assert err.loc is not None and err.loc.file == str(src) and err.loc.line == 1
        assert "s3cr3t" not in str(err)
        res = CliRunner().invoke(main, ["asm", str(src), "-o", str(tmp_path / "o.elf")])
        assert res.exit_code == 1 and "s3cr3t" not in res.output, res.output


def test_the_debugger_does_not_show_a_file_an_image_names_that_is_not_source(tmp_path: Path) -> None:
    from npkit.toolchain.debug.source import SourceMap

    secret = tmp_path / "secret.txt"
    secret.write_text("root:s3cr3t:20228:0:99999:7:::\n")
    view = SourceMap(assemble(EXAMPLES / "hello.uc").program)
    assert view.source_line(str(secret), 1) == ""
    ok = tmp_path / "ok.uc"
    ok.write_text("nop\n")
    assert view.source_line(str(ok), 1) == "nop"


def test_a_cached_check_whose_dependency_became_a_fifo_is_stale_not_waited_on(tmp_path: Path) -> None:
    """The content cache keeps a checked config with the files it read (a chip config's
    `base`); a base replaced by a FIFO since makes the entry stale at once."""
    from npkit.asm.base.deps import note_read, recording, unchanged

    base = tmp_path / "base.yaml"
    base.write_text("num_me: 16\n")
    with recording() as deps:
        note_read(base, base.read_bytes())
    assert unchanged(deps)
    base.unlink()
    os.mkfifo(base)
    with _unblocked([base]) as waited:
        assert not unchanged(deps)
    assert not waited, "the check waited on the FIFO"


@pytest.mark.parametrize("value", ["1" * 5000, "0x" + "f" * 5000, "-" + "9" * 200])
def test_a_huge_integer_in_a_layout_define_is_a_usage_error(tmp_path: Path, value: str) -> None:
    """`-D NAME=VALUE` reads VALUE as YAML: the same rule as in a file."""
    res = CliRunner().invoke(main, ["link", "pipelined", "-D", f"qm.qlimit={value}", "-o", str(tmp_path / "o.elf")])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2 and f"-D qm.qlimit: an integer of {len(value):,} characters is too long" in res.output


def test_a_design_whose_traffic_spec_is_a_fifo_is_refused(tmp_path: Path) -> None:
    design = _design(tmp_path)
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    design.write_text(design.read_text().replace(f"{TRAFFIC}/seed003_balanced.yaml", str(fifo)))
    with _unblocked([fifo]) as waited:
        res = CliRunner().invoke(main, ["experiment", "design", str(design)])
    assert not waited, "the design check waited on the FIFO"
    assert res.exit_code == 1 and f"{fifo}: traffic spec {FIFO_MESSAGE}" in res.output, res.output
