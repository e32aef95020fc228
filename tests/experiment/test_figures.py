"""The README's seed 003 figures are made from a recorded run (figures.py): the paragraph
between the markers is what docs/images/experiment_seed003.json gives, the JSON names
the commit and code it came from and agrees with itself, and the plot is there."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image

from npkit.toolchain.experiment.figures import (
    BEGIN,
    END,
    IMAGE,
    README,
    REFERENCE,
    paragraph,
    readme_block,
)


def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def test_the_readme_paragraph_is_made_from_the_recorded_run() -> None:
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert readme_block(reference()) in text


def test_the_recorded_run_is_a_full_one_with_its_commit() -> None:
    ref = reference()
    assert re.fullmatch(r"[0-9a-f]{40}", ref["commit"]) and re.fullmatch(r"[0-9a-f]{16}", ref["code_hash"])
    assert not ref["quick"] and ref["runs"] == 24
    assert ref["commit"][:12] in paragraph(ref) and ref["code_hash"] in paragraph(ref)


def test_the_headline_figures_agree_with_the_cells_and_effects_recorded() -> None:
    ref = reference()
    cap = ref["cells"]["capacity_mbps"]
    for size, (lo, hi) in ref["capacity_gbps"].items():
        mine = [v / 1000 for c, v in cap.items() if c.startswith(f"A={size} ")]
        assert len(mine) == 4 and (lo, hi) == pytest.approx((min(mine), max(mine)))
    assert ref["q_B"] == pytest.approx(ref["effects"]["capacity_mbps"]["B"]["q"])
    assert ref["capacity_pct_A"] == pytest.approx(ref["effects"]["capacity_mbps"]["A"]["pct"])
    # q_B is half the difference of the B levels' means over the cells
    full = [v for c, v in cap.items() if " B=full " in c]
    stub = [v for c, v in cap.items() if " B=stub " in c]
    assert ref["q_B"] == pytest.approx((sum(stub) / 4 - sum(full) / 4) / 2)
    assert all(ref["cells"]["loss_pct"][c] > 0 for c in ref["worst"]["cells"])


def test_the_plot_is_checked_in() -> None:
    img = Image.open(IMAGE)
    assert img.size[0] >= 600 and img.size[1] >= 250
