"""Which networks the book ships, and shipping them (``cflib networks``).

The *measuring* networks of the book's run (profile ``standard``, training seed 0) of
every chapter: whatever a user's row is measured with, so that it is measured by the
book's own networks on any machine (:mod:`cflib.shipped`):

* the C3LT chapters (MNIST, Fashion-MNIST): the explained C3LT CNN, the IM class
  autoencoders of the table's classes and the all-class autoencoder, the FID/KID feature
  network and the independent classifiers (:func:`cflib.bench.tables.c3lt.load_eval_models`);
* the Bayesian chapter (MNIST): the MC-dropout network, the BNN, the IM class
  autoencoders of the ten classes;
* the quantization chapter (Fashion-MNIST): the FP32 SmallCNN every recipe quantizes.

The methods' own networks (DCGAN, encoders, C3LT's mappings, ExpGAN, PSCE's
autoencoders, the quantization recipes) are their training and are retrained.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from cflib import provenance as prov
from cflib import shipped
from cflib.bench.data import CF_PAIRS, n_classes
from cflib.bench.profiles import normalised
from cflib.cache import cache_key, cache_root, events, networks_used, read_entry

#: where ``cflib networks ship`` writes by default: ``networks/`` of the project
NETWORKS_DIR = prov.CHECKOUT / "networks"
#: the kinds of network a row is measured with (not a method's own training)
MEASURING_KINDS = frozenset({"classifier", "autoencoder", "feature_net", "judge_classifier",
                             "judge_resnet", "judge_mlp", "mc_dropout_classifier",
                             "bnn_classifier", "small_cnn"})


@normalised
def measuring_networks(profile="standard", seed: int = 0, device="cpu") -> list[dict]:
    """Load (or train) every measuring network of the book's chapters at ``profile`` and
    training seed ``seed``; the :func:`cflib.cache.networks_used` records of them, one per
    network, in the order asked."""
    from cflib.bench import zoo
    from cflib.bench.tables import bayes, c3lt

    prof = profile
    before = len(networks_used())
    for dataset, pairs in CF_PAIRS.items():
        c3lt.load_eval_models(dataset, [c for p in pairs for c in p], prof, seed, device)
    for model in bayes.MODELS:
        bayes.bayes_model("mnist", model, prof, seed, device)
    for c in range(n_classes("mnist")):
        zoo.autoencoder("mnist", c, prof, seed, device=device)
    zoo.small_cnn("fmnist", prof, seed, device)
    seen, out = set(), []
    for u in networks_used(before):
        if u["entry"] not in seen:
            seen.add(u["entry"])
            out.append(u)
    return out


def ship(root=None, profile="standard", seed: int = 0,
         trained_at: str | None = None, threads: int = 1) -> tuple[Path, list[dict]]:
    """Write the measuring networks (:func:`measuring_networks`) to ``root``: each as
    safetensors with its manifest entry.  A network already shipped keeps its file and
    entry; one from the cache carries its recorded provenance, or, for a cache entry
    written before provenance was recorded, ``trained_at``: the commit that trained it,
    accepted only when its training code equals today's.  Returns the manifest's path and
    the entries written (``root``: the project's ``networks/`` when None)."""
    import torch

    root = Path(root or NETWORKS_DIR)
    if root.resolve() != NETWORKS_DIR.resolve():
        from cflib.bench.folders import check_output_dir

        root = check_output_dir(root, "--root", "leave it out: the project's networks/")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)      # the book's networks are trained at one thread
    try:
        used = measuring_networks(profile, seed)
    finally:
        torch.set_num_threads(before)
    active = shipped.shipped_root()
    old = {e["file"]: e for e in shipped.manifest(active).values()} if active else {}
    seconds = {e["entry"]: float(e["seconds"]) for e in events() if e["event"] == "trained"}
    legacy = []
    networks = []
    for u in used:
        if u["origin"] == "shipped":
            networks.append(_from_shipped(active, old[u["entry"]]))
            continue
        net, unrecorded = _from_cache(u, seconds, trained_at)
        networks.append(net)
        if unrecorded:
            legacy.append((u["kind"], unrecorded))
    if legacy:
        if trained_at is None:
            raise ValueError(f"{len(legacy)} cache entries recorded no provenance (e.g. "
                             f"{legacy[0][1].name}); name the commit that trained them with "
                             "--trained-at COMMIT (its training code is read from git and "
                             "recorded), or retrain them (delete them from the cache)")
    return shipped.write(root, networks), networks


def _from_cache(u: dict, seconds: dict, trained_at: str | None) -> tuple[dict, Path | None]:
    """A measuring network read from the cache as :func:`ship` writes it, and the entry's
    path when it predates recorded provenance (then ``trained_at`` names its commit)."""
    path = cache_root() / u["entry"]
    payload = read_entry(path)
    config = dict(payload["config"])
    trained_on = config.pop("trained_on")
    made = payload.get("provenance")
    legacy = made is None
    if legacy:
        made = {"commit": trained_at,
                "code": prov.training_code_at(u["code"], trained_at) if trained_at else {},
                "date": dt.date.fromtimestamp(path.stat().st_mtime).isoformat()}
        if u["entry"] in seconds:
            made["seconds"] = seconds[u["entry"]]
    return ({"kind": u["kind"], "key": cache_key(config), "config": config,
             "state": payload["state_dict"], "info": payload.get("info", {}),
             "trained_on": trained_on, "provenance": made}, path if legacy else None)


def _from_shipped(root: Path, entry: dict) -> dict:
    from safetensors.torch import load_file

    return {"kind": entry["kind"], "key": entry["key"], "config": entry["config"], "state": load_file(str(root / entry["file"])),
            "info": entry["info"], "trained_on": entry["trained_on"],
            "provenance": entry["provenance"]}


def check(root=None) -> list[str]:
    """The problems of a shipped folder (the project's ``networks/`` when None): a listed
    file missing or failing its sha256, a file not listed (empty: every file is its
    manifest's)."""
    root = Path(root or NETWORKS_DIR)
    if not root.is_dir():
        return [f"{root} is not a folder of shipped networks"]
    if not (root / shipped.MANIFEST).is_file():
        return [f"{root} has no {shipped.MANIFEST}"]
    entries = shipped.manifest(root)
    if not entries:
        return [f"{root}/{shipped.MANIFEST} lists no network"]
    problems = []
    for e in entries.values():
        f = root / e["file"]
        if not f.is_file():
            problems.append(f"{e['file']}: listed in {shipped.MANIFEST}, missing")
        elif shipped.file_sha256(f) != e["sha256"]:
            problems.append(f"{e['file']}: fails its sha256 in {shipped.MANIFEST}")
    listed = {e["file"] for e in entries.values()}
    for f in sorted(root.glob("*.safetensors")):
        if f.name not in listed:
            problems.append(f"{f.name}: not listed in {shipped.MANIFEST}")
    return problems


def listing(root=None) -> list[str]:
    """One line per shipped network (the project's ``networks/`` when None): file, size,
    test accuracy or error, provenance."""
    root = Path(root or NETWORKS_DIR)
    lines = []
    total = 0
    for name, e in shipped.manifest(root).items():
        total += e["bytes"]
        score = next((f"{k} {v:.4g}" for k, v in e["info"].items()
                      if k in ("test_accuracy", "test_mse")), "")
        lines.append(f"{e['file']:<48} {e['bytes'] / 1e6:5.2f} MB  {score:<22} "
                     f"{prov.describe(e['provenance'])}")
    lines.append(f"{len(lines)} networks, {total / 1e6:.1f} MB in {root}")
    return lines

