"""`npk demo` ended by SIGTERM, SIGHUP or SIGINT leaves no temporary file or child
process behind and exits 128 + the signal; a second signal exits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import descendants_of, kill_all, wait_for, wait_gone

NPK = str(Path(sys.executable).with_name("npk"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_during_demo_cleans_up(tmp_path: Path, sig: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([NPK, "demo", "--ms", "500", "--json"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    kids: list[int] = []
    try:
        # the control daemon's directory is there and the traffic is read ahead in a child
        assert wait_for(lambda: any(tmp.glob("npkd-*")) and descendants_of(proc.pid), proc=proc), \
            "the demo should be running with its daemon's directory and a child"
        kids = descendants_of(proc.pid)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + sig, err.decode()
    assert f"interrupted by {sig.name}" in err.decode()
    assert "Traceback" not in err.decode()
    assert list(tmp.iterdir()) == []  # /tmp/npkd-* and every other temporary file gone
    left = wait_gone(kids, 10)
    kill_all(left)
    assert left == []


SLOW_CLEANUP = textwrap.dedent("""
    import sys, time
    from npkit.toolchain.commands.signals import cleaned_up_on_signals
    with cleaned_up_on_signals():
        try:
            print("running", flush=True)
            time.sleep(60)
        finally:
            print("cleaning", flush=True)
            time.sleep(60)
            print("cleaned", flush=True)
""")


def test_second_signal_exits_at_once(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLEANUP], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "running\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == "cleaning\n"  # the first signal: the clean-up runs
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=30)  # well before the clean-up's minute
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGHUP
    assert "cleaned" not in out and "SIGHUP again: exiting at once" in err


IN_UNICORN = textwrap.dedent("""
    from unicorn import Uc, UC_ARCH_ARM, UC_MODE_ARM, UC_HOOK_CODE
    from npkit.toolchain.commands.signals import cleaned_up_on_signals

    uc = Uc(UC_ARCH_ARM, UC_MODE_ARM)
    uc.mem_map(0x1000, 0x1000)
    uc.mem_write(0x1000, bytes.fromhex("feffffea"))  # b . (a loop)
    seen = []
    def hook(uc, addr, size, data):  # a callback from C at every instruction
        if not seen:
            seen.append(addr)
            print("running", flush=True)
    uc.hook_add(UC_HOOK_CODE, hook)
    with cleaned_up_on_signals():
        try:
            while True:
                uc.emu_start(0x1000, 0x2000, count=100000)
        finally:
            print("cleaned up", flush=True)
""")


def test_signal_inside_a_unicorn_callback_is_raised_outside() -> None:
    """A signal that comes while Unicorn runs is handled at the entry of its next hook:
    not swallowed there ('Exception ignored on calling ctypes callback', and the run
    went on), but raised once out of the callback: cleaned up, exit 143."""
    proc = subprocess.Popen([sys.executable, "-c", IN_UNICORN], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "running\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "cleaned up" in out
    assert "Exception ignored" not in err and "Traceback" not in err
