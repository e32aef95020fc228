"""Designs as data: the example designs, validation, what each target changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.design import DesignError, design_from_dict, load_design
from npkit.toolchain.experiment.execute import prepare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "experiments"
TRAFFIC = str(ROOT / "examples" / "traffic" / "seed003_balanced.yaml")


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_designs_load(path: Path, quick: bool) -> None:
    d = load_design(path, quick=quick)
    runs = d.runs()
    assert len({r.run_id for r in runs}) == len(runs) == len(d.points()) * d.replications
    assert len({r.config_hash for r in runs}) == len(runs)  # every run differs (levels or seed)


def test_the_examples_the_issue_asks_for() -> None:
    s3 = load_design(EXAMPLES / "seed003.yaml")
    assert s3.replications >= 3 and s3.compare == "seed003" and s3.two_level
    assert [f.levels[0].label for f in s3.factors] == ["78", "full", "4"]  # the seed's -1 levels
    assert "capacity_mbps" in s3.responses and s3.capacity is not None
    pay = load_design(EXAMPLES / "payload_sweep.yaml")
    assert pay.kind == "sweep" and [lv.label for lv in pay.factor("P").levels][::7] == ["0", "1480"]
    assert [lv.label for lv in pay.factor("Q").levels] == ["full", "stub"]
    par = load_design(EXAMPLES / "parallel_scaling.yaml")
    assert [lv.label for lv in par.factor("M").levels] == [str(i) for i in range(1, 9)]
    assert [lv.label for lv in par.factor("S").levels] == ["64", "78"]
    mem = load_design(EXAMPLES / "memory_sensitivity.yaml")
    assert [len(f.levels) for f in mem.factors] == [3, 3, 2] and mem.factor("S").scale
    over = load_design(EXAMPLES / "seed003_overload.yaml")
    assert over.base["traffic_set"]["link_bps"] > 1e9  # offered above what the router forwards
    scr = load_design(EXAMPLES / "screening.yaml")
    assert scr.kind == "fractional" and scr.resolution() == 3 and len(scr.points()) == 8


def base(**over: object) -> dict:
    d = {"name": "t", "base": {"traffic": TRAFFIC, "routes": None},
         "factors": {"A": {"set": "param.qm", "levels": ["full", "stub"]}},
         "steady": {"window_us": 5, "min_ms": 0.25, "max_ms": 0.3}}
    d.update(over)
    return d


@pytest.mark.parametrize("over, words", [
    ({"factors": {"A": {"set": "nowhere.x", "levels": [1, 2]}}}, "unknown target"),
    ({"factors": {"A": {"set": "param.qm", "levels": [1]}}}, "at least two levels"),
    ({"factors": {"A": {"set": "param.qm"}}}, "levels must be a list"),
    ({"factors": {"A": {"set": "block.qm.colour", "levels": [1, 2]}}}, "block.NAME.variant"),
    ({"factors": {"A": {"set": "param.qm", "levels": ["a", "b"], "scale": True}}}, "numeric levels"),
    ({"kind": "fractional", "factors": {"A": {"set": "param.x", "levels": [1, 2, 3]}}}, "exactly two levels"),
    ({"kind": "fractional", "generators": {"B": "AZ"},
      "factors": {"A": {"set": "param.x", "levels": [1, 2]}, "B": {"set": "param.y", "levels": [1, 2]}}},
     "distinct base factors"),
    ({"kind": "sweep", "sweep": "A"}, "numeric levels"),
    ({"kind": "bogus"}, "kind"),
    ({"steady": {"window_us": 50, "min_ms": 0.5}}, "too few"),
    ({"capacity": {"min_mbps": 5, "max_mbps": 1}}, "min_mbps"),
    ({"replications": 0}, "replications"),
    ({"extra": 1}, "unknown keys"),
    ({"base": {"traffic": "/no/such/spec.yaml"}}, "no such file"),
])  # fmt: skip
def test_bad_designs_say_why(over: dict, words: str) -> None:
    with pytest.raises(DesignError, match=words):
        design_from_dict(base(**over))


def test_targets_reach_the_run(tmp_path: Path) -> None:
    d = design_from_dict(base(
        seed=7,
        factors={
            "S": {"set": ["chip.units.sram.read_latency", "chip.units.sram.write_latency"],
                  "scale": True, "levels": [1, 1.5]},
            "K": {"set": "chip.clock_mhz", "levels": [1400, 1000]},
            "Q": {"set": "block.qm.variant", "levels": ["full", "stub"]},
            "P": {"set": "traffic.ip_payload", "levels": [0, 1480]},
        },
        base={"traffic": TRAFFIC, "routes": None, "params": {"parse_threads": 4},
              "traffic_set": {"defaults.protocol": "udp", "wire": "ethernet"}},
    ))  # fmt: skip
    hi = {"S": "1.5", "K": "1000", "Q": "stub", "P": "1480"}
    cfg = d.config(hi, seed=9)
    env = prepare(cfg, tmp_path)
    chip = yaml.safe_load(env.chip.read_text())
    assert chip["units"]["sram"]["read_latency"] == 135 and chip["units"]["sram"]["write_latency"] == 60
    assert chip["clock_mhz"] == 1000 and chip["units"]["dram"]["read_latency"] == 200
    assert env.spec["seed"] == 9 and env.spec["defaults"]["size"] == 1518  # 34 + 1480 + FCS
    assert env.params == {"parse_threads": 4}
    assert isinstance(env.layout, dict) and env.layout["blocks"]["qm"]["variant"] == "stub"
    (tmp_path / "lo").mkdir()
    (tmp_path / "t").mkdir()
    lo = prepare(d.config({"S": "1", "K": "1400", "Q": "full", "P": "0"}, seed=1), tmp_path / "lo")
    assert lo.spec["defaults"]["size"] == 64  # never below the smallest UDP frame
    # seed 003's tunnel counted without FCS: 44 bytes after the outer IPv4 header = 78 B
    t = design_from_dict(base(factors={"P": {"set": "traffic.ip_payload", "levels": [44, 100]}}))
    assert prepare(t.config({"P": "44"}, seed=1), tmp_path / "t").spec["defaults"]["size"] == 78


def test_cli_design_and_bad_input(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["experiment", "design", str(EXAMPLES / "screening.yaml")])
    assert r.exit_code == 0 and "resolution 3" in r.output and "A = BD = CE = ABCDE" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nfactors: 3\n")
    for args in (["experiment", "design", str(bad)],
                 ["experiment", "run", str(bad), "-o", str(tmp_path / "out")],
                 ["experiment", "run", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "o")],
                 ["experiment", "analyze", str(tmp_path)],
                 ["experiment", "report", str(tmp_path), "-o", str(tmp_path / "r.html")]):  # fmt: skip
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 1, (args, r.output)
        assert "Error:" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["experiment", "run", str(bad), "-o", str(tmp_path / "o"), "--jobs", "2",
                                  "--scheduler", "tcp://127.0.0.1:1"])  # fmt: skip
    assert r.exit_code == 2 and "--jobs" in r.output


def test_report_to_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    """The format is -o's suffix: anything but HTML or Markdown is refused before the store
    is read (it was exit 1, as if the store were at fault)."""
    r = CliRunner().invoke(main, ["experiment", "report", str(tmp_path), "-o", str(tmp_path / "r.txt")])
    assert r.exit_code == 2 and "Invalid value for '-o'" in r.output and "the report is .html or .md" in r.output
    assert not (tmp_path / "r.txt").exists()


# ---- qa_ana 7, 12: bounds and every run's inputs checked before any run starts ------------


def _write(tmp_path: Path, data: dict | str, name: str = "d.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


@pytest.mark.parametrize("over, where, words", [
    ({"replications": 1_000_000}, "replications", "replications: an integer in 1..1000, got 1000000"),
    ({"replications": 600, "factors": {f"F{i}": {"set": "param.qm", "levels": ["full", "stub"]} for i in range(5)}},
     "replications", "replications: 32 points x 600 replications = 19,200 runs, more than 10,000"),
    ({"factors": {"A": {"set": "layout", "levels": ["pipelined", "nosuch"]}}}, "levels",
     "factors.A.levels: the run with A=nosuch: layout nosuch: no such file"),
    ({"factors": {"A": {"set": "param.nosuch", "levels": [1, 2]}}}, "levels",
     "factors.A.levels: the run with A=1: .*-D nosuch: the layout has no such parameter"),
    ({"factors": {"A": {"set": "traffic.defaults.size", "levels": [78, -5]}}}, "levels",
     "factors.A.levels: the run with A=-5: traffic spec .*seed003_balanced.yaml: defaults.size: .*got -5"),
    ({"capacity": {"trial_ms": float("nan")}}, "trial_ms", "capacity.trial_ms: must be a finite number, got nan"),
    ({"responses": ["throughput_mbps", "nosuch_response"]}, "- nosuch_response", "responses\\[1\\]: no response 'nosuch_response'"),
])  # fmt: skip
def test_design_and_run_check_every_run_first(tmp_path: Path, over: dict, where: str, words: str) -> None:
    path = _write(tmp_path, base(**over))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(where))
    with pytest.raises(DesignError, match=f"^{path.resolve()}:{line}: {words}") as e:
        load_design(path)
    assert "npk-" not in str(e.value)  # no scratch directory named
    for cmd in (["design", path], ["run", path, "-o", tmp_path / "out"]):
        res = CliRunner().invoke(main, ["experiment", *map(str, cmd)])
        assert res.exit_code == 1 and (res.exception is None or isinstance(res.exception, SystemExit))
        assert f"{path.resolve()}:{line}:" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out" / "runs").exists()  # nothing ran


@pytest.mark.parametrize("text, words", [
    ("name: [x\n", r"d.yaml:2: YAML syntax: expected ',' or ']'"),
    ("name: x\x00\n", "d.yaml:1: experiment design holds a NUL byte"),
])  # fmt: skip
def test_unreadable_designs_in_file_line_form(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(DesignError, match=words):
        load_design(_write(tmp_path, text))


def test_analyze_says_when_every_run_failed(tmp_path: Path) -> None:
    from npkit.toolchain.experiment.store import Store

    d = design_from_dict(base(), check_files=False)
    store = Store(tmp_path / "res")
    runs = d.runs()
    store.init({"name": "t", "runs": [r.run_id for r in runs], "factors": d.keys}, yaml.safe_dump(base()))
    for r in runs:
        store.save({"run_id": r.run_id, "point": r.point, "replicate": r.replicate, "seed": r.seed,
                    "levels": r.levels, "status": "failed", "error": "LinkError: x", "responses": {},
                    "config_hash": r.config_hash})  # fmt: skip
    res = CliRunner().invoke(main, ["experiment", "analyze", str(tmp_path / "res")])
    assert res.exit_code == 1, res.output
    assert "no run finished (2 failed, 0 missing): nothing to analyse" in res.output


@pytest.mark.parametrize("factors, words", [
    # 1 and 1.0 are two labels for one multiplier: two identical design points
    ({"S": {"set": "chip.units.sram.read_latency", "scale": True, "levels": [1, 1.0]}},
     "factors.S: levels 1 and 1.0 set the same values"),
    ({"W": {"levels": {"a": {"param.qm": "full"}, "b": {"param.qm": "full"}}}},
     "factors.W: levels a and b set the same values"),
    # B's size would replace A's in every run: A would show no effect at all
    ({"A": {"set": "traffic.defaults.size", "levels": [78, 128]},
      "B": {"set": "traffic.defaults.size", "levels": [256, 512]}},
     "factors.B: sets traffic.defaults.size, as factor A does"),
    ({"A": {"set": "traffic.defaults.size", "levels": [78, 128]},
      "P": {"set": "traffic.ip_payload", "levels": [0, 100]}},
     "factors.P: sets traffic.defaults.size, as factor A does"),
    ({"Q": {"set": "param.qm", "levels": ["full", "stub"]},
      "W": {"levels": {"x": {"param.qm": "full", "param.parse_threads": 4}, "y": {"param.parse_threads": 8}}}},
     "factors.W: sets param.qm, as factor Q does"),
])  # fmt: skip
def test_levels_and_factors_that_would_hide_an_effect(factors: dict, words: str) -> None:
    with pytest.raises(DesignError, match=words):
        design_from_dict(base(factors=factors), check_files=False)


def test_factors_that_scale_one_target_multiply(tmp_path: Path) -> None:
    d = design_from_dict(base(factors={
        "S": {"set": "chip.units.sram.read_latency", "scale": True, "levels": [1, 1.5]},
        "T": {"set": "chip.units.sram.read_latency", "scale": True, "levels": [1, 2]},
    }))  # fmt: skip
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base_latency = yaml.safe_load(prepare(d.config({"S": "1", "T": "1"}, 1), tmp_path / "a").chip.read_text())
    both = yaml.safe_load(prepare(d.config({"S": "1.5", "T": "2"}, 1), tmp_path / "b").chip.read_text())
    assert both["units"]["sram"]["read_latency"] == 3 * base_latency["units"]["sram"]["read_latency"]
