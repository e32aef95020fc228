"""Seed 003's published figures (the diversified router's performance study), which the
report and the README's figures are put beside: per effect, its q on throughput (Mb/s)
and its % of the variation, and what the paper says of the rest."""

from __future__ import annotations

SEED003 = {"A": (464.0, 75.7), "B": (148.0, 7.7), "AB": (-215.0, 16.3), "C": (0.0, 0.0)}
SEED003_NOTE = ("Seed 003 read the simulator's throughput once, at cycle 40,000, with no replications "
                "(its simulator was deterministic too) and no configuration reached 5 Gb/s; "
                "C was 'inconsequential' and the other interactions 'minimal' (no figures given).")  # fmt: skip
