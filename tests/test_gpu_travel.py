"""What `make gpu-check` sends to a GPU machine fits the machine's 64 MiB
(benchmarks/gpu_travel.py): the code, the tests, the benchmarks and the data archive,
never the shipped networks, results or pages."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_travel  # noqa: E402


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The data archive `make gpu-data` writes, written once from ``CFLIB_DATA``."""
    root = Path(os.environ.get("CFLIB_DATA") or ROOT / "data")
    if not all((root / d).is_dir() for d in gpu_travel.DATASETS):
        pytest.skip(f"no MNIST and Fashion-MNIST under {root} (CFLIB_DATA)")
    return gpu_travel.write_archive(tmp_path_factory.mktemp("gpu-data") / "data.tar.gz", root)


def test_what_travels_is_the_code_never_the_shipped_files():
    for path in ("cflib/explainers/cem.py", "tests/test_device.py", "benchmarks/gpu_check.sh",
                 "notebooks/c3lt_table.py", "Makefile", "pyproject.toml", ".gitignore"):
        assert gpu_travel.travels(path), path
    for path in ("networks/MANIFEST.json", "results/mnist_eval.csv", "book/chapters/x.ipynb",
                 "cflib_old/x.py", "testsuite/x.py", "Makefile.local", "_build/gpu-data/x"):
        assert not gpu_travel.travels(path), path


def test_the_archive_holds_both_datasets_and_their_checksums(archive):
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for d in ("MNIST", "FashionMNIST"):   # what the chapter and the throughput benchmark read
        for split in ("train", "t10k"):
            assert {f"{d}/raw/{split}-images-idx3-ubyte", f"{d}/raw/{split}-labels-idx1-ubyte"} \
                <= names, sorted(names)
    assert "SHA256SUMS" in names
    assert not any(n.endswith(".part") for n in os.listdir(archive.parent))


def test_the_gpu_check_fits_the_64_MiB_that_travel(archive):
    sizes = gpu_travel.travel_bytes("HEAD", archive=archive)
    assert sizes["total"] <= gpu_travel.LIMIT, sizes
    # the archive is most of it: both datasets compressed (about 41 MiB), not their 107 MiB
    assert 30 * 2**20 < sizes["_build/gpu-data (carried)"] < 50 * 2**20, sizes
    # and what stays behind is what made the whole tree too large
    whole = sum(size for _, _, size in gpu_travel.tracked("HEAD").values())
    assert whole - (sizes["total"] - sizes["_build/gpu-data (carried)"]) > 40 * 2**20


def test_the_branch_holds_exactly_what_travels():
    branch = f"test-gpu-travel-{os.getpid()}"
    try:
        commit = gpu_travel.write_branch("HEAD", branch=branch)
        files = subprocess.run(["git", "ls-tree", "-r", "--name-only", "-z", commit], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split("\0")
        head = gpu_travel.tracked("HEAD")
        assert set(filter(None, files)) == {p for p in head if gpu_travel.travels(p)}
        # the blobs are HEAD's, byte for byte
        assert gpu_travel.tracked(commit) == {p: v for p, v in head.items()
                                              if gpu_travel.travels(p)}
    finally:
        subprocess.run(["git", "update-ref", "-d", f"refs/heads/{branch}"], cwd=ROOT)


def test_an_oversized_tree_is_refused_and_writes_no_branch(monkeypatch, capsys):
    monkeypatch.setattr(gpu_travel, "LIMIT", 2**20)
    monkeypatch.setattr(gpu_travel, "archive_bytes", lambda root=None, archive=None: 0)
    monkeypatch.setattr(gpu_travel, "BRANCH", f"test-gpu-travel-refused-{os.getpid()}")
    written = []
    monkeypatch.setattr(gpu_travel, "write_branch", lambda *a, **k: written.append(a))
    assert gpu_travel.main(["branch"]) == 1
    assert "OVER" in capsys.readouterr().out and not written
