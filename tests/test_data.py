"""Datasets and their errors; tests that read the files skip when the data root lacks them."""
import pytest
import torch
import torchvision

from cflib.bench import data
from cflib.bench.data import (
    CF_PAIRS,
    check_pair,
    class_subset,
    load_split,
    n_classes,
    parse_pair,
)
from cflib.bench.profiles import get_profile

HAVE = {name: (data.data_root() / folder / "raw" / "t10k-images-idx3-ubyte").exists()
        for name, folder in (("mnist", "MNIST"), ("fmnist", "FashionMNIST"))}


def needs(name):
    return pytest.mark.skipif(not HAVE[name], reason=(
        f"{name} files are not in the data root {data.data_root()} (set CFLIB_DATA)"))


@pytest.mark.data
@pytest.mark.parametrize("name", ["mnist", pytest.param("fmnist", marks=needs("fmnist"))])
def test_load_split_shapes_and_range(name):
    if not HAVE[name]:
        pytest.skip(f"{name} files are not in the data root {data.data_root()}")
    x, y = load_split(name, "test")
    assert x.shape == (10000, 1, 28, 28) and x.dtype == torch.float32
    assert x.min().item() == -1.0 and x.max().item() == 1.0
    assert y.shape == (10000,) and set(y.unique().tolist()) == set(range(10))
    xt, yt = load_split(name, "train")
    assert len(xt) == 60000


@pytest.mark.data
@needs("mnist")
def test_class_subset_is_seeded_and_filtered():
    x, y = load_split("mnist", "test")
    a, ya = class_subset(x, y, 4, n=50, seed=1)
    b, _ = class_subset(x, y, 4, n=50, seed=1)
    c, _ = class_subset(x, y, 4, n=50, seed=2)
    assert (ya == 4).all() and len(a) == 50
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_cf_pairs_are_the_papers():
    assert CF_PAIRS["mnist"] == [(4, 9), (3, 8), (5, 6)]
    assert CF_PAIRS["fmnist"] == [(0, 2), (7, 9), (4, 6)]
    assert parse_pair("4->9") == (4, 9) and parse_pair([3, 8]) == (3, 8)


def test_unknown_dataset_is_named():
    with pytest.raises(ValueError, match="unknown dataset 'cifar'"):
        load_split("cifar")


def test_equal_pair_is_refused():
    with pytest.raises(ValueError, match="equal"):
        check_pair((4, 4), n_classes("mnist"))
    with pytest.raises(ValueError, match="0..9"):
        check_pair("4->11", n_classes("mnist"))
    assert check_pair("4->9", n_classes("fmnist")) == (4, 9)
    assert n_classes("fashion-mnist") == 10


def test_unknown_profile_is_named():
    with pytest.raises(ValueError, match="unknown profile 'huge'.*smoke"):
        get_profile("huge")


def test_missing_data_root_names_folder_and_variable(tmp_path, monkeypatch):
    """The project never downloads at run time: a missing file is an error, not a fetch."""
    monkeypatch.setenv("CFLIB_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr(torchvision.datasets.MNIST, "download",
                        lambda self: pytest.fail("tried to download"))
    data._load.cache_clear()
    with pytest.raises(FileNotFoundError) as err:
        load_split("mnist", "test")
    msg = str(err.value)
    assert str(tmp_path / "nowhere" / "MNIST" / "raw") in msg and "CFLIB_DATA" in msg
    assert "never downloads" in msg and not (tmp_path / "nowhere").exists()
    data._load.cache_clear()
