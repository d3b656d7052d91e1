"""What `make gpu-check` needs on the GPU machine, and nothing else: a tree of at most 64 MiB.

    python benchmarks/gpu_travel.py data      # the data archive to carry (make gpu-data)
    python benchmarks/gpu_travel.py size      # what would travel, file group by file group
    python benchmarks/gpu_travel.py branch    # write it as the branch `gpu-check`

A device machine receives the checkout it is called from (tracked files and untracked files
that git does not ignore) plus the paths it is told to carry, 64 MiB in all.  The
repository is larger than that (its shipped networks alone are about 41 MB), and the
gpu-check needs none of the shipped networks, results or pages: it trains every network
from an empty cache (``CFLIB_SHIPPED=off``) with the code, runs the device tests and the
benchmarks, and reads MNIST and Fashion-MNIST from the archive :func:`write_archive`
writes (`make gpu-data`).

``branch`` writes a commit holding only :data:`TRAVELS` of ``HEAD`` (its tree, not the
working tree's edits) as the local branch ``gpu-check``, its message naming the commit it
came from.  The call, from the checkout that travels::

    make gpu-tree              # the branch, and the data archive in _build/gpu-data
    git switch gpu-check       # the shipped networks, results and pages leave the disk
    # the device call: `GPU_CHECK_OUT=$OUT make gpu-check`, carrying _build/gpu-data
    git switch -               # and they are back

Rehearsed without a GPU from a worktree of that branch (the same steps on the CPU at
``smoke``): ``GPU_CHECK_DEVICE=cpu GPU_CHECK_PROFILE=smoke GPU_CHECK_IMAGES=4 make gpu-check``.

:func:`travel_bytes` is what `tests/test_gpu_travel.py` holds to :data:`LIMIT`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what travels: the library, the tests (test_device.py imports helpers of others), the
#: benchmarks the gpu-check runs, the chapters' notebooks (a table's spec names its source),
#: and the files that make the tree a project (build and ignore rules, the Makefile)
TRAVELS = ("cflib/", "tests/", "benchmarks/", "notebooks/", "pyproject.toml", "Makefile",
           ".gitignore", "README.md", "environment.yml")
#: the device machine's limit on what travels: the tree and the carried paths together
LIMIT = 64 * 2**20
#: the archive `make gpu-data` writes and the call carries
DATA_ARCHIVE = Path("_build/gpu-data/data.tar.gz")
#: the datasets it holds: MNIST for the chapter, Fashion-MNIST for the benchmark's
#: quantization setting
DATASETS = ("MNIST", "FashionMNIST")
BRANCH = "gpu-check"


def _git(*args: str, env: dict | None = None, input: str | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                         env=env, input=input)
    if out.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def travels(path: str) -> bool:
    """Whether a repository path is one the gpu-check takes along."""
    return any(path == t or (t.endswith("/") and path.startswith(t)) for t in TRAVELS)


def tracked(rev: str = "HEAD") -> dict[str, tuple[str, str, int]]:
    """Every file of ``rev``: path -> (mode, blob, size in bytes)."""
    files = {}
    for line in _git("ls-tree", "-r", "-l", "-z", rev).split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        mode, kind, blob, size = meta.split()
        if kind == "blob":
            files[path] = (mode, blob, int(size))
    return files


def _data_root(data_root: str | os.PathLike | None) -> Path:
    root = Path(data_root or os.environ.get("CFLIB_DATA") or ROOT / "data")
    missing = [d for d in DATASETS if not (root / d).is_dir()]
    if missing:
        raise FileNotFoundError(f"no {', '.join(missing)} under {root}: set CFLIB_DATA to the "
                                "data root")
    return root


def write_archive(out: str | os.PathLike, data_root: str | os.PathLike | None = None) -> Path:
    """The data archive the gpu-check unpacks: :data:`DATASETS` of ``data_root``
    (``CFLIB_DATA``) and its ``SHA256SUMS`` (cflib checks the files against it), gzipped;
    written whole or not at all."""
    root, out = _data_root(data_root), Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    with tarfile.open(part, "w:gz", compresslevel=6) as tar:     # gzip's default, as tar -z
        for d in DATASETS:
            tar.add(root / d, arcname=d)
        if (root / "SHA256SUMS").is_file():
            tar.add(root / "SHA256SUMS", arcname="SHA256SUMS")
    return part.replace(out)


def archive_bytes(data_root: str | os.PathLike | None = None,
                  archive: str | os.PathLike | None = None) -> int:
    """The size of the data archive: ``archive``, else the one `make gpu-data` wrote, else
    (or with ``data_root``) one written now into a temporary folder."""
    if archive is not None:
        return Path(archive).stat().st_size
    if (ROOT / DATA_ARCHIVE).is_file() and data_root is None:
        return (ROOT / DATA_ARCHIVE).stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        return write_archive(Path(tmp) / DATA_ARCHIVE.name, data_root).stat().st_size


def travel_bytes(rev: str = "HEAD", data_root: str | os.PathLike | None = None,
                 archive: str | os.PathLike | None = None) -> dict[str, int]:
    """What a gpu-check call sends from the branch :func:`write_branch` makes of ``rev``,
    in bytes, by group (the top folder or file), with the data archive and the total."""
    groups: dict[str, int] = {}
    for path, (_, _, size) in tracked(rev).items():
        if travels(path):
            top = path.split("/", 1)[0]
            groups[top] = groups.get(top, 0) + size
    groups["_build/gpu-data (carried)"] = archive_bytes(data_root, archive)
    groups["total"] = sum(groups.values())
    return groups


def write_branch(rev: str = "HEAD", branch: str = BRANCH) -> str:
    """Write the commit of :data:`TRAVELS` of ``rev`` as ``branch``; its hash."""
    source = _git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    keep = {p: v for p, v in tracked(source).items() if travels(p)}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git("update-index", "--add", "--index-info", env=env,
             input="".join(f"{mode} {blob}\t{path}\n" for path, (mode, blob, _) in keep.items()))
        tree = _git("write-tree", env=env).strip()
    commit = _git("commit-tree", tree, "-m",
                  f"gpu-check: what travels to the GPU machine, from {source[:12]}").strip()
    _git("update-ref", f"refs/heads/{branch}", commit)
    return commit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("data", "size", "branch"))
    ap.add_argument("--rev", default="HEAD")
    args = ap.parse_args(argv)
    if args.what == "data":     # the folder is the archive's alone (an earlier one goes)
        shutil.rmtree(ROOT / DATA_ARCHIVE.parent, ignore_errors=True)
        out = write_archive(ROOT / DATA_ARCHIVE)
        print(f"{out.relative_to(ROOT)}: {out.stat().st_size / 2**20:.2f} MiB")
        return 0
    sizes = travel_bytes(args.rev)
    for group, n in sizes.items():
        print(f"{group:<32} {n / 2**20:8.2f} MiB")
    over = sizes["total"] > LIMIT
    print(f"limit {LIMIT / 2**20:.0f} MiB: {'OVER' if over else 'fits'}")
    if args.what == "branch" and not over:
        print(f"branch {BRANCH}: {write_branch(args.rev)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
