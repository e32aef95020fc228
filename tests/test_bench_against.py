"""`npk bench --against`: this tree's `npk demo` against another build's, side by side."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.bench import bench_cmd
from npkit.toolchain.system import against
from npkit.toolchain.system.against import AgainstError, Timed, build_ref, is_built, side_by_side


class Scripted:
    """A runner that answers from a script of wall times and records the order of runs."""

    def __init__(self, walls: dict[str, list[float]], codes: dict[str, int] | None = None,
                 ems: dict[str, float | None] | None = None) -> None:  # fmt: skip
        self.walls = {k: list(v) for k, v in walls.items()}
        self.codes = codes or {}
        self.ems = ems or {}
        self.order: list[str] = []

    def __call__(self, cmd: Sequence[str]) -> Timed:
        side = cmd[0]
        self.order.append(side)
        em = self.ems.get(side, 10.06)
        out = json.dumps({"emulated_ms": em}) if em is not None else "not json"
        wall = self.walls[side].pop(0)
        return Timed(wall, self.codes.get(side, 0), out, cpu_s=wall / 2)


def test_pairs_alternate_after_a_warm_up_and_medians_give_the_ratio() -> None:
    run = Scripted({"A": [99.0, 3.0, 2.0, 4.0], "B": [99.0, 8.0, 6.0, 7.0]})
    res = side_by_side(["A"], ["B"], pairs=3, run=run)
    assert run.order == ["A", "B", "B", "A", "A", "B", "B", "A"]  # warm-up, then who starts alternates
    assert res["wall_s.this"] == 3.0 and res["wall_s.other"] == 7.0  # the warm-up's 99 s is not counted
    assert res["speedup"] == round(7.0 / 3.0, 2)
    assert res["pair_speedup"] == round(8 / 3, 2) and res["pair_speedup_range"] == [7 / 4, 6 / 2]  # 8/3, 6/2, 7/4
    assert res["emulated_ms_per_host_s.this"] == round(10.06 / 3.0, 3)
    assert res["emulated_ms_per_host_s.other"] == round(10.06 / 7.0, 3)
    assert res["cpu_s.this"] == 1.5 and res["cpu_s.other"] == 3.5
    assert res["verdict"] == {"ok": True, "reasons": []}


def test_an_other_build_without_the_json_field_emulates_the_same_time() -> None:
    run = Scripted({"A": [1.0, 2.0], "B": [1.0, 4.0]}, ems={"B": None})
    res = side_by_side(["A"], ["B"], pairs=1, run=run)
    assert res["emulated_ms"] == 10.06 and res["emulated_ms_per_host_s.other"] == round(10.06 / 4.0, 3)


def test_a_run_that_fails_fails_the_verdict() -> None:
    run = Scripted({"A": [1.0, 1.0], "B": [1.0, 1.0]}, codes={"B": 1})
    res = side_by_side(["A"], ["B", "demo"], pairs=1, run=run)
    assert not res["verdict"]["ok"]
    assert res["verdict"]["reasons"] == ["other: `B demo` exited 1"] * 2


class ScriptedRates:
    """A runner whose `npk bench emu --json` prints the next of a script of rates a side."""

    def __init__(self, rates: dict[str, list[dict[str, float]]], codes: dict[str, int] | None = None) -> None:
        self.rates = {k: list(v) for k, v in rates.items()}
        self.codes = codes or {}
        self.order: list[str] = []

    def __call__(self, cmd: Sequence[str]) -> Timed:
        side = cmd[0]
        self.order.append(side)
        return Timed(1.0, self.codes.get(side, 0), json.dumps(self.rates[side].pop(0)))


def _rates(alu: float, mem: float, idle: float = 1.0, inflight: float | None = 2.0) -> dict[str, float]:
    r = {"emu.alu_mips": alu, "emu.mem_mips": mem, "emu.idle_gcycles_per_s": idle, "emu.inflight_refs": 6400}
    return r | ({"emu.inflight_mrefs_per_s": inflight} if inflight is not None else {})


def test_emulator_rates_are_compared_pair_by_pair_after_a_warm_up() -> None:
    run = ScriptedRates({"A": [_rates(1, 1), _rates(400, 40), _rates(300, 42), _rates(420, 38)],
                         "B": [_rates(1, 1), _rates(100, 10), _rates(100, 12), _rates(84, 10)]})  # fmt: skip
    res = against.rates_side_by_side(["A"], ["B"], pairs=3, run=run)
    assert run.order == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert res["alu_mips.this"] == 400 and res["alu_mips.other"] == 100  # medians; the warm-up's 1 not counted
    # the ratio within each round (4, 3, 5 and 4, 3.5, 3.8), not of the medians (4 and 3.8)
    assert res["alu_mips.speedup"] == 4.0 and res["alu_mips.speedup_range"] == [3.0, 5.0]
    assert res["mem_mips.speedup"] == 3.8 and res["mem_mips.speedup_range"] == [3.5, 4.0]
    assert "inflight_refs.this" not in res  # a count, not a rate
    assert res["verdict"] == {"ok": True, "reasons": []} and res["notes"] == []


def test_an_older_build_without_a_rate_is_noted_and_this_tree_without_one_fails() -> None:
    old = [_rates(100, 10, inflight=None)] * 2
    res = against.rates_side_by_side(["A"], ["B"], pairs=1, run=ScriptedRates({"A": [_rates(400, 40)] * 2, "B": old}))
    assert res["verdict"]["ok"] and res["alu_mips.speedup"] == 4.0
    assert res["inflight_mrefs_per_s.other"] is None and res["inflight_mrefs_per_s.speedup"] is None
    assert res["notes"] == ["other: `B` reported no emu.inflight_mrefs_per_s"]
    res = against.rates_side_by_side(["A"], ["B"], pairs=1, run=ScriptedRates({"A": old, "B": [_rates(400, 40)] * 2}))
    assert not res["verdict"]["ok"]
    assert res["verdict"]["reasons"] == ["this: `A` reported no emu.inflight_mrefs_per_s"] * 2
    failed = ScriptedRates({"A": [_rates(400, 40)] * 2, "B": [_rates(100, 10)] * 2}, codes={"A": 1, "B": 2})
    res = against.rates_side_by_side(["A"], ["B"], pairs=1, run=failed)
    assert res["verdict"]["reasons"] == ["this: `A` exited 1"] * 2 and res["notes"] == ["other: `B` exited 2"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def _repo(tmp_path: Path, makefile: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "Makefile").write_text(makefile)
    _git(repo, "add", "Makefile")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return repo


# a "build" that makes a venv-like npk: a script run by .venv/bin/python (here /bin/sh)
FAKE_BUILD = ("all:\n\tmkdir -p .venv/bin\n\tln -sf /bin/sh .venv/bin/python\n"
              "\tprintf '#!%s/.venv/bin/python\\necho built\\n' '$(CURDIR)' > .venv/bin/npk\n"
              "\tchmod +x .venv/bin/npk\n\techo x >> ../builds\n")  # fmt: skip


def test_a_commit_is_built_once_in_its_own_tree(tmp_path: Path) -> None:
    repo = _repo(tmp_path, FAKE_BUILD)
    root = tmp_path / "against"
    sha = _git(repo, "rev-parse", "HEAD")
    assert not is_built("HEAD", repo=repo, root=root)
    npk = build_ref("HEAD", repo=repo, root=root)
    assert npk == root / sha / ".venv" / "bin" / "npk"
    assert is_built(sha[:8], repo=repo, root=root)
    assert subprocess.run([str(npk)], capture_output=True, text=True).stdout == "built\n"
    assert build_ref(sha[:8], repo=repo, root=root) == npk
    assert (root / "builds").read_text() == "x\n"  # the second call found the build


def test_concurrent_comparisons_build_a_commit_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path, FAKE_BUILD)
    root = tmp_path / "against"
    with ThreadPoolExecutor(4) as pool:
        npks = list(pool.map(lambda _: build_ref("HEAD", repo=repo, root=root), range(4)))
    assert len(set(npks)) == 1 and (root / "builds").read_text() == "x\n"


def test_a_build_that_lost_its_interpreter_is_built_again(tmp_path: Path) -> None:
    repo = _repo(tmp_path, FAKE_BUILD)
    root = tmp_path / "against"
    npk = build_ref("HEAD", repo=repo, root=root)
    (npk.parent / "python").unlink()  # what a cache trim that walked the tree once did
    assert not is_built("HEAD", repo=repo, root=root)
    assert build_ref("HEAD", repo=repo, root=root) == npk
    assert subprocess.run([str(npk)], capture_output=True, text=True).stdout == "built\n"
    assert (root / "builds").read_text() == "x\nx\n"


def test_a_ref_that_is_not_a_commit_or_does_not_build_is_an_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "all:\n\techo compiling; echo 'error: no such thing' >&2; exit 2\n")
    with pytest.raises(AgainstError, match="'nope' is not a commit"):
        build_ref("nope", repo=repo, root=tmp_path / "against")
    with pytest.raises(AgainstError, match=r"failed \(exit 2\)[\s\S]*error: no such thing"):
        build_ref("HEAD", repo=repo, root=tmp_path / "against")


def _fake_npk(path: Path, code: int) -> Path:
    path.write_text(f"#!/bin/sh\necho '{{\"emulated_ms\": 1.06}}'\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_bench_against_an_npk_prints_compare_figures_and_fails_when_a_run_fails(tmp_path: Path) -> None:
    ok = CliRunner().invoke(bench_cmd, ["--against-npk", str(_fake_npk(tmp_path / "ok", 0)), "--quick", "--json"])
    assert ok.exit_code == 0, ok.output
    figures = json.loads(ok.output)
    assert set(figures) >= {"compare.against", "compare.pipelined.speedup", "compare.parallel.wall_s.this"}
    assert all(k.startswith("compare.") for k in figures)  # alone, --against runs only the comparison
    # this tree's side is the real demo: it emulated (and reported) what was asked
    assert figures["compare.pipelined.emulated_ms"] >= 1.0
    assert figures["compare.pipelined.verdict"]["ok"] and figures["compare.parallel.pairs"] == 1
    # the real demo takes CPU time; the fake one hardly any
    assert figures["compare.pipelined.cpu_s.this"] > 10 * figures["compare.pipelined.cpu_s.other"]
    # `npk bench emu --quick` too: this tree's rates are real, the fake reports none
    assert figures["compare.emu.verdict"]["ok"] and figures["compare.emu.alu_mips.this"] > 0
    assert figures["compare.emu.alu_mips.other"] is None and figures["compare.emu.alu_mips.speedup"] is None
    assert figures["compare.emu.notes"] == [f"other: `{tmp_path / 'ok'} bench emu --json --quick` reported no "
                                            + ", ".join(against.EMU_RATES)]  # fmt: skip
    bad = CliRunner().invoke(bench_cmd, ["--against-npk", str(_fake_npk(tmp_path / "bad", 3)), "--quick"])
    assert bad.exit_code == 1
    assert "compare.pipelined.verdict" in bad.output and "exited 3" in bad.output


def test_against_and_against_npk_together_are_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(bench_cmd, ["--against", "HEAD", "--against-npk", str(_fake_npk(tmp_path / "n", 0))])
    assert res.exit_code == 2 and "give one" in res.output


def test_the_demo_command_is_what_both_sides_run() -> None:
    assert against.demo_command("npk", "parallel", 10.0) == ["npk", "demo", "--ms", "10", "--layout", "parallel",
                                                              "--json"]  # fmt: skip


def test_the_other_tree_is_built_without_the_calling_make_or_this_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = str(against.ROOT / ".venv" / "bin")
    monkeypatch.setenv("MAKEFLAGS", " -- REF=801c1cf")
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    env = against.build_env()
    assert "MAKEFLAGS" not in env and "MAKELEVEL" not in env
    assert env["PATH"] == "/usr/bin:/bin"


def test_benchmarks_that_leave_threads_run_after_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """`npk bench` with no names runs every benchmark in name order, those registered
    `last` (Dask leaves its threads) after the others; named ones run as named."""
    from npkit.toolchain import bench

    bench.registry()
    assert "experiment" in bench._LAST  # the real one: Dask's threads stay after its cluster

    ran: list[str] = []

    def fake(name: str):  # noqa: ANN202 - a BenchFn
        return lambda quick: ran.append(name) or {f"{name}.x": 1}

    monkeypatch.setattr(bench, "registry", lambda: {n: fake(n) for n in ("alpha", "dask", "omega")})
    monkeypatch.setattr(bench, "_LAST", {"dask"})
    assert bench.run_benchmarks([], quick=True) == {"alpha.x": 1, "omega.x": 1, "dask.x": 1}
    assert ran == ["alpha", "omega", "dask"]
    ran.clear()
    bench.run_benchmarks(["dask", "alpha"], quick=True)
    assert ran == ["dask", "alpha"]


def test_against_npk_must_be_an_executable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare name in the current directory was looked up on PATH: a FileNotFoundError
    traceback after a whole warm-up demo of this tree."""
    from npkit.toolchain.system.against import AgainstError, runnable_npk

    monkeypatch.chdir(tmp_path)
    (tmp_path / "npk-old").write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(AgainstError, match="npk-old: not executable"):
        runnable_npk("npk-old")
    (tmp_path / "npk-old").chmod(0o755)
    assert runnable_npk("npk-old") == tmp_path / "npk-old"
    r = CliRunner().invoke(bench_cmd, ["--against-npk", str(tmp_path)])
    assert r.exit_code == 2
    (tmp_path / "plain").write_text("x")
    r = CliRunner().invoke(bench_cmd, ["--against-npk", "plain", "--quick"])
    assert r.exit_code == 1 and "plain: not executable" in r.output, r.output
    assert isinstance(r.exception, SystemExit)
