"""The harness that runs Linux's IXP2400 receive/transmit images (npkit.emulator.linux_rxtx,
`npk bench fidelity` with NPK_LINUX_IXP2000), exercised with npkit's own programs written
to the same driver contract (tests/msf/linux_contract): receive on every ME of both
chips, transmit on the next, the host stand-in (examples/linux_ixp2400/host.uc) on the
one after."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.asm.assembler import assemble
from npkit.asm.errors import Diagnostics
from npkit.toolchain.system.linux_rxtx import Images, LinuxRxTxError, find_images, run_every_me

from .conftest import spec_traffic

HERE = Path(__file__).resolve().parent / "linux_contract"
PER_CLUSTER = {"ixp2800": (8, 3), "ixp2400": (4, 2)}


def _images(config: str) -> Images:
    k, log2 = PER_CLUSTER[config]
    d = {"ME_PER_CLUSTER": str(k), "ME_PER_CLUSTER_LOG2": str(log2)}
    rx = assemble(HERE / "rx.uc", defines=d, diags=Diagnostics()).program.words
    tx = assemble(HERE / "tx.uc", diags=Diagnostics()).program.words
    return Images(tuple(rx), tuple(tx), "linux_contract")


@pytest.mark.parametrize("config", sorted(PER_CLUSTER))
def test_contract_programs_forward_on_every_me(config: str) -> None:
    traffic = spec_traffic("min64.yaml", 10_000)
    results = run_every_me(_images(config), config, traffic, 100_000)
    assert len(results) == (16 if config == "ixp2800" else 8)
    for r in results:
        assert r["balanced"] and not r["halted"], r
        assert (r["forwarded"], r["in_flight"]) == (len(traffic), 0), r
    assert {r["rx"] for r in results} == {r["tx"] for r in results}  # every ME did both


def test_missing_images_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LinuxRxTxError, match="ixp2400_rx"):
        find_images(tmp_path)
