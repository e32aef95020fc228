"""Seed 003's design (--quick) end to end: run, analyze, report; the HTML report
renders in headless Chromium with every image."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.runner import run_experiment

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
CHECK = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.title = 'IMAGES ' + ok + '/' + imgs.length;
});
</script></body>"""


@pytest.fixture(scope="module")
def seed003(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seed003") / "results"
    s = run_experiment(ROOT / "examples" / "experiments" / "seed003.yaml", out, quick=True, progress=False)
    assert s["runs"] == 16 and not s["failed"] and not s["missing"]
    return out


def chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    assert exe, "chromium is installed by make (APT_PKGS)"
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)  # fmt: skip


def test_seed003_analysis(seed003: Path) -> None:
    r = CliRunner().invoke(main, ["experiment", "analyze", str(seed003), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    cap = res["responses"]["capacity_mbps"]
    effects = {e["effect"]: e for e in cap["effects"]}
    assert set(effects) == {"A", "B", "C", "AB", "AC", "BC", "ABC"}
    # 256-byte packets carry more bits at the same per-packet work: A dominates capacity
    assert effects["A"]["q"] > 500 and effects["A"]["pct"] > 80 and effects["A"]["significant"]
    assert sum(e["pct"] for e in cap["effects"]) + cap["error"]["pct"] == pytest.approx(100)
    assert all(e["ci"] is not None for e in cap["effects"])  # r = 2: CIs from replications
    assert {row["term"] for row in cap["anova"]["table"]} >= {"A", "B", "C", "error"}
    text = CliRunner().invoke(main, ["experiment", "analyze", str(seed003)]).output
    assert "== capacity_mbps" in text and "% var" in text


def test_report_renders_in_chromium(seed003: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["experiment", "report", str(seed003), "-o", str(html)])
    assert r.exit_code == 0, r.output
    text = html.read_text()
    for words in ("Beside seed 003", "75.7", "What the emulator shows", "% of variation", "MSER-5",
                  "deterministic", "RFC 2544", "Results table", "normal QQ"):  # fmt: skip
        assert words in text, words
    srcs = re.findall(r'<img src="([^"]+)"', text)
    assert len(srcs) >= 8 and all((tmp_path / s).is_file() for s in srcs)
    assert (tmp_path / "report_files" / "runs" / "p000r0.png").is_file()  # a plot per run
    # every image loads in a real browser
    check = tmp_path / "check.html"
    check.write_text(text.replace("</body>", CHECK))
    dom = chromium(["--virtual-time-budget=20000", "--dump-dom", check.as_uri()], tmp_path)
    m = re.search(r"<title>IMAGES (\d+)/(\d+)</title>", dom.stdout)
    assert m, dom.stderr[-2000:]
    assert m[1] == m[2] == str(len(srcs))
    # and the page is not blank
    shot = tmp_path / "shot.png"
    chromium([f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars", html.as_uri()], tmp_path)
    img = Image.open(shot).convert("L")
    assert img.size == (1200, 2400)
    hist = img.histogram()
    dark = sum(hist[:200]) / (img.size[0] * img.size[1])
    assert dark > 0.02, "the screenshot is (nearly) blank"
    assert sum(1 for n in hist if n) > 50  # text, tables and plots: many grey levels
    # the Markdown report uses the same figures
    md = tmp_path / "report.md"
    assert CliRunner().invoke(main, ["experiment", "report", str(seed003), "-o", str(md)]).exit_code == 0
    imgs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md.read_text())
    assert len(imgs) == len(srcs) and all((tmp_path / s).is_file() for s in imgs)


def test_seed003_report_has_interaction_plots_and_cell_means(seed003: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["experiment", "report", str(seed003), "-o", str(html),
                                     "--no-run-plots"]).exit_code == 0  # fmt: skip
    text = html.read_text()
    res = json.loads(CliRunner().invoke(main, ["experiment", "analyze", str(seed003), "--json"]).output)
    cap = res["responses"]["capacity_mbps"]
    assert "AC" in [t["term"] for t in cap["interactions"]]  # significant in the quick run too
    assert "Significant interactions on capacity_mbps: AC" in text
    assert "Interactions and cell means: capacity_mbps" in text
    plot = tmp_path / "report_files" / "interaction_terms_capacity_mbps.png"
    assert plot.is_file() and 'src="report_files/interaction_terms_capacity_mbps.png"' in text
    # the cell means table: one row per configuration with its CI
    assert len(cap["cell_means"]) == 8 and all(c["ci"] and c["n"] == 2 for c in cap["cell_means"])
    for c in cap["cell_means"]:
        assert c["ci"][0] < c["mean"] < c["ci"][1]
    # the larger packet is named, and the quick run says what it changes against the full run
    assert "Factor A&#x27;s levels here: 78 B at the chip" in text and "256 B is this design&#x27;s choice" in text
    assert "Warning: this is the --quick variant" in text
    assert "--quick changes conclusions: against the full run recorded in docs/images/experiment_seed003.json" in text
    assert re.search(r"latency_p99_us at A=78 B=full C=4: [0-9.]+ here, [0-9.]+ in the full run", text)


def test_readme_figures_of_a_run_come_from_its_analysis(seed003: Path) -> None:
    from npkit.toolchain.experiment.figures import reference_of

    ref = reference_of(seed003)
    res = json.loads(CliRunner().invoke(main, ["experiment", "analyze", str(seed003), "--json"]).output)
    effects = {e["effect"]: e for e in res["responses"]["capacity_mbps"]["effects"]}
    assert ref["q_B"] == pytest.approx(effects["B"]["q"]) and ref["capacity_pct_A"] == pytest.approx(effects["A"]["pct"])
    means = {c["levels"]["A"] + " " + c["levels"]["B"] + " " + c["levels"]["C"]: c["mean"]
             for c in res["responses"]["capacity_mbps"]["cell_means"]}  # fmt: skip
    small = [v / 1000 for k, v in means.items() if k.startswith("78 ")]
    assert ref["capacity_gbps"]["78"] == pytest.approx([min(small), max(small)])
    assert ref["quick"] and ref["runs"] == 16
    # the README is made from full runs only
    r = CliRunner().invoke(main, ["experiment", "readme-figures", str(seed003)])
    assert r.exit_code == 1 and "a --quick run" in r.output


LAYOUT = """<script>
window.addEventListener('load', function () {
  var page = document.body.getBoundingClientRect().width;
  var wide = function (sel) {
    return Array.prototype.slice.call(document.querySelectorAll(sel)).filter(function (t) {
      return t.getBoundingClientRect().width > page + 1 || t.scrollWidth > t.clientWidth + 1; }).length; };
  var scroll = document.documentElement.scrollWidth > window.innerWidth ? 1 : 0;
  document.title = 'LAYOUT ' + wide('table') + ' ' + wide('img') + ' ' + scroll + ' ' +
    document.querySelectorAll('table').length + ' ' + Math.round(page);
});
</script></body>"""


@pytest.mark.parametrize("width", [1200, 760])  # a screen, and about an A4 page's printable width
def test_report_tables_and_figures_fit_the_page(seed003: Path, tmp_path: Path, width: int) -> None:
    html = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["experiment", "report", str(seed003), "-o", str(html),
                                     "--no-run-plots"]).exit_code == 0  # fmt: skip
    check = tmp_path / "layout.html"
    check.write_text(html.read_text().replace("</body>", LAYOUT))
    dom = chromium([f"--window-size={width},1000", "--virtual-time-budget=20000", "--dump-dom", check.as_uri()],
                   tmp_path)  # fmt: skip
    m = re.search(r"<title>LAYOUT (\d+) (\d+) (\d+) (\d+) (\d+)</title>", dom.stdout)
    assert m, dom.stderr[-2000:]
    wide_tables, wide_images, scrolls, tables, page = (int(x) for x in m.groups())
    assert tables >= 10 and page <= width
    assert (wide_tables, wide_images, scrolls) == (0, 0, 0)  # nothing cut off or scrolled sideways
    # the results table (every run, every response) is one of them: its last column is on the page
    assert "display:block" not in html.read_text()
    # the per-run throughput panels: 4 a row, each about a quarter of the report's width
    series = Image.open(tmp_path / "report_files" / "series.png")
    assert series.size[0] / 4 >= 250
