"""`make test`, the README's command, installs what its suite needs beside the venv
(headless Chromium and its driver) or stops at once, before any test, with one line
naming what to install."""
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")


def _bin(tmp_path: Path, tools=("sh", "id"), fakes: dict | None = None) -> Path:
    """A PATH folder with only ``tools`` (linked) and ``fakes`` (name -> shell script)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        (folder / tool).symlink_to(shutil.which(tool))
    for name, body in (fakes or {}).items():
        (folder / name).write_text("#!/bin/sh\n" + body + "\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
@pytest.mark.parametrize("case, fakes, why", [
    ("no apt", {}, "no apt-get"),
    ("not root, no sudo", {"id": "echo 1000", "apt-get": "exit 0"}, "not root, no sudo"),
])
def test_make_test_stops_at_once_when_the_browser_cannot_be_installed(tmp_path, case, fakes,
                                                                      why):
    tools = ("sh",) if "id" in fakes else ("sh", "id")
    env = {"PATH": str(_bin(tmp_path, tools, fakes)), "HOME": str(tmp_path)}
    start = time.monotonic()
    run = subprocess.run([MAKE, "-s", "-C", str(ROOT), "test", "VENV=" + str(tmp_path / "venv")],
                         env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    assert run.returncode != 0, case
    assert took < 60
    ours = [line for line in run.stderr.splitlines() if line.startswith("make test needs")]
    assert len(ours) == 1, run.stderr
    assert why in ours[0] and "chromium chromium-driver" in ours[0], ours[0]
    assert not (tmp_path / "venv").exists(), "the venv was built before the browser check"
    assert "pytest" not in run.stdout + run.stderr


def test_ci_holds_no_install_logic_of_its_own():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "apt-get" not in ci and "chromium" not in ci.lower().replace(
        "headless chromium", "")
    commands = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands[-1] == "make test", commands[-1]      # CI runs the README's command
