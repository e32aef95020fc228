"""`npk run`: load an image on the emulated chip, run it, print statistics."""

from __future__ import annotations

import json
from typing import Any

import click

from .binding import Chip, EmulatorError
from .loader import LoadError, load_path


def _me_list(text: str | None) -> list[int] | None:
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def _summary(chip: Chip, reason: str, loaded: dict[int, str]) -> dict[str, Any]:
    st = chip.stats()
    cycle = st["cycle"]
    mes = []
    for m in st["mes"]:
        if m["me"] not in loaded:
            continue
        info = chip.me_status(m["me"])
        busy = m["executing_cycles"] + m["aborted_cycles"] + m["stalled_cycles"]
        mes.append({**{k: v for k, v in m.items() if k != "ctx"}, "program": loaded[m["me"]],
                    "utilization": busy / cycle if cycle else 0.0, "pc": info["pc"],
                    "reason": info["reason"]})  # fmt: skip
    units = {name: [c for c in chans] for name, chans in st["units"].items() if any(c["commands"] for c in chans)}
    clock = float(chip.config["clock_mhz"])
    return {"config": st["config"], "stop": reason, "cycle": cycle, "time_us": cycle / clock,
            "mes": mes, "units": units}  # fmt: skip


@click.command("run")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("--config", "config", default="ixp2800", show_default=True, help="Chip config name or YAML path.")
@click.option("--cycles", default=1_000_000, show_default=True, type=int, help="Cycle budget.")
@click.option("--me", "me_list", default=None, help="MEs to load on, e.g. 0,1 or 0-3.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def run_cmd(image: str, config: str, cycles: int, me_list: str | None, as_json: bool) -> None:
    """Run IMAGE on the emulated chip and print statistics."""
    try:
        chip = Chip(config)
        loaded = load_path(chip, image, _me_list(me_list))
        reason = chip.run(cycles)
    except (EmulatorError, LoadError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    out = _summary(chip, reason, loaded)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['config']}: stopped ({reason}) at cycle {out['cycle']} ({out['time_us']:.2f} us)")
    for m in out["mes"]:
        click.echo(f"  ME {m['me']:2d} {m['program']:<16s} {m['status']:<8s} instr {m['instructions']:>10d} "
                   f"util {m['utilization'] * 100:5.1f}%  swaps {m['ctx_swaps']:>8d}  pc {m['pc']}"
                   + (f"  ({m['reason']})" if m["status"] not in ("running", "idle") else ""))  # fmt: skip
    for name, chans in out["units"].items():
        for i, c in enumerate(chans):
            click.echo(f"  {name}[{i}] commands {c['commands']:>8d} bytes {c['bytes']:>10d} "
                       f"util {c['utilization'] * 100:5.1f}% queue max {c['queue_max']} mean {c['queue_mean']:.2f}")  # fmt: skip
