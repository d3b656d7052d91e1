"""atomic_write on a full disk: torch's serializer says only "[enforce fail ...] file write
failed"; the writer turns that (and the OSError of a plain write) into one OSError that
names the file and the space left, keeps the old file and leaves no temporary file. Any
other failure passes through as it was raised."""
from __future__ import annotations

import errno

import pytest
import torch

from cflib.io import atomic_write


def _torch_full(path):                     # what torch.save raises when the disk fills
    raise RuntimeError("[enforce fail at inline_container.cc:626] . PytorchStreamWriter "
                       "failed writing file data/0: file write failed")


def _os_full(path):
    path.write_bytes(b"half")
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("writer", [_torch_full, _os_full])
def test_a_full_disk_is_one_error_naming_the_file_and_the_old_file_stays(tmp_path, writer):
    path = tmp_path / "weights.pt"
    atomic_write(path, b"old")
    with pytest.raises(OSError, match=r"No space left on device to write .*weights\.pt "
                                      r"\(.* free there, or the disk quota is exceeded\): "
                                      r"nothing was written") as err:
        atomic_write(path, writer)
    assert err.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["weights.pt"]


def test_another_failure_passes_through_unchanged(tmp_path):
    def broken(path):
        raise RuntimeError("a bug in the writer")

    with pytest.raises(RuntimeError, match="^a bug in the writer$"):
        atomic_write(tmp_path / "x.bin", broken)
    with pytest.raises(PermissionError):
        atomic_write(tmp_path / "y.bin", lambda p: (_ for _ in ()).throw(PermissionError(13, "no")))
    assert list(tmp_path.iterdir()) == []


def test_torch_save_through_the_writer_still_writes(tmp_path):
    path = atomic_write(tmp_path / "t.pt", lambda p: torch.save({"a": torch.ones(2)}, p))
    assert torch.equal(torch.load(path, weights_only=True)["a"], torch.ones(2))


def test_a_pair_is_replaced_whole_or_not_at_all(tmp_path):
    """A second save of a pair whose .json hits a full disk left the new .pt beside the
    old .json (the pair then failed its checksum): both are staged, then both renamed."""
    from cflib.io import atomic_write_all

    a, b = tmp_path / "x.pt", tmp_path / "x.json"
    atomic_write_all([(a, b"old-pt"), (b, b"old-json")])
    with pytest.raises(OSError, match="No space left on device to write .*x\\.json"):
        atomic_write_all([(a, b"new-pt"), (b, _os_full)])
    assert (a.read_bytes(), b.read_bytes()) == (b"old-pt", b"old-json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.pt"]


def test_a_folder_that_is_a_file_is_named(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"cannot write .*afile/cf\.pt: a part of its "
                                                 r"folder is a file"):
        atomic_write(tmp_path / "afile" / "cf.pt", b"x")
