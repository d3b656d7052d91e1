"""A user's method as the book's tables run it: read from a class, a function or a
``package.module:Name`` path (:func:`resolve_method`), probed on a table's untrained
classifier before anything is trained, guarded while it runs (the classifier's weights,
a fit that fails, a batch that fails: :class:`MethodError` naming the method, the table
and the pair) and given to a table's runner as a catalog entry (:func:`entry`)."""
from __future__ import annotations

import importlib
import inspect
import re
import reprlib
from dataclasses import dataclass, fields, is_dataclass

import torch

from cflib.bench import catalog
from cflib.bench.tables.registry import TableSpec
from cflib.explainers import Explainer, from_function
from cflib.scopes import seeded

__all__ = ["Method", "MethodError", "resolve_method", "probe", "entry", "state_of"]


class MethodError(RuntimeError):
    """A user's method failed while a table ran it (building, fitting or explaining); the
    message names the method, the table and the pair, and the cause is chained."""



@dataclass(frozen=True)
class Method:
    """A user's method as :func:`compare` builds it: its name (the results' ``method``),
    its explainer class, its checked config and how it was given."""

    name: str
    cls: type[Explainer]
    config: object
    given: str

    def build(self, classifier) -> Explainer:
        return self.cls(classifier, self.config)


#: a dotted Python name (a module path, or an attribute path within the module)
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


#: what a guard lets through as it is: the user's own interrupt, a generator's close
_PASSES = (KeyboardInterrupt, GeneratorExit)


def _import_path(path: str):
    """The object ``"package.module:Name"`` names; a ValueError names what is missing."""
    if path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"method {path!r}: an import path is 'package.module:Name' (e.g. "
                         "'mypkg.mymodule:MyExplainer')")
    module, attr = path.split(":")
    if not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(attr) or any(
            part.startswith("__") for part in attr.split(".")):
        raise ValueError(f"method {path!r}: an import path is 'package.module:Name', dotted "
                         "Python names (no folder, no file name, no private attribute such "
                         "as __globals__); put the module on PYTHONPATH, or in the current "
                         "folder for cflib bench")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name and (module == err.name or module.startswith(err.name + ".")):
            raise ValueError(f"method {path!r}: no module named {err.name!r} (is it on "
                             "sys.path? PYTHONPATH, and for cflib bench the current folder, "
                             "are searched)") from None
        raise ValueError(f"method {path!r}: importing module {module!r} failed: {err}") from err
    except SystemExit as err:
        raise ValueError(f"method {path!r}: importing module {module!r} called sys.exit"
                         f"({err.code!r}); a method's module defines the method, it does not "
                         "end the run") from None
    except _PASSES:
        raise
    except BaseException as err:       # a BaseException of the method's own too
        raise ValueError(f"method {path!r}: importing module {module!r} raised "
                         f"{type(err).__name__}: {err}") from err
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(mod) if not n.startswith("_")]
            raise ValueError(f"method {path!r}: module {module!r} has no attribute {part!r} "
                             f"(it defines {names[:12]}{'...' if len(names) > 12 else ''})")
        obj = getattr(obj, part)
    return obj


def _name_of(cls: type[Explainer]) -> str:
    """The method's name: ``name`` set on the class (or on a base class of the user's),
    else the class's own name (a name inherited from one of cflib's classes is not
    the user's method's)."""
    for c in cls.__mro__:
        if "name" in c.__dict__:
            if c is cls or not c.__module__.startswith("cflib."):
                return c.__dict__["name"]
            break
    return cls.__name__


def resolve_method(method, config: dict | None = None) -> Method:
    """``method`` (a class, a ``"package.module:Name"`` path or a function) and its
    ``config`` as a :class:`Method`; every error names the method and the fix."""
    given = method
    if isinstance(method, str):
        method = _import_path(method)
    if isinstance(method, Explainer):
        raise TypeError(f"method {given!r} is an explainer already built (with its own "
                        "classifier); pass its class: compare builds it with each table's "
                        "classifier")
    if isinstance(method, type):
        if not issubclass(method, Explainer):
            raise TypeError(f"method {given!r} is the class {method.__qualname__}, not a "
                            "subclass of cflib.explainers.Explainer (or pass a function "
                            "fn(model, x, target) -> x_cf)")
        cls = method
    elif callable(method):
        cls = from_function(method, name=getattr(method, "__name__", None))
    else:
        raise TypeError(f"method must be an Explainer subclass, an import path "
                        f"'package.module:Name' or a function fn(model, x, target) -> x_cf; "
                        f"got {type(method).__name__} {reprlib.repr(method)}")
    name = _name_of(cls)
    if name in catalog.CATALOG:
        raise ValueError(f"method {given!r} is called {name!r}, a row of the book's own; set "
                         f"name = '...' on {cls.__qualname__} to name your method otherwise")
    config = {} if config is None else config
    if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
        raise TypeError(f"config of {name} must be a dict of its config's fields, got "
                        f"{config!r}")
    if not (isinstance(cls.Config, type) and is_dataclass(cls.Config)):
        raise TypeError(f"{name}.Config must be a frozen dataclass of its arguments (a "
                        "subclass of cflib.explainers.ExplainerConfig)")
    known = [f.name for f in fields(cls.Config)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise TypeError(f"{name} has no argument(s) {unknown}; its config "
                        f"{cls.Config.__name__} takes {sorted(known)}")
    cfg = cls.Config(**config)        # the class's own checks (ValueError, ...)
    how = (f"import path {given!r}" if isinstance(given, str)
           else f"{'class' if isinstance(given, type) else 'function'} "
                f"{getattr(given, '__module__', '?')}.{getattr(given, '__qualname__', given)}")
    return Method(name, cls, cfg, how)


def probe(method: Method, table: TableSpec) -> None:
    with seeded(0):            # the stand-in's initialisation: the global RNG restored
        clf = table.stand_in(table.model)
        before = state_of(clf)
        try:
            ex = method.build(clf)
        except SystemExit as err:
            raise ValueError(f"{method.cls.__qualname__}(classifier, config) called sys.exit"
                             f"({err.code!r}) while being built; a method returns "
                             "counterfactuals or raises an error") from None
        except _PASSES:
            raise
        except Exception as err:
            err.add_note(f"(raised while building {method.name} as {method.cls.__qualname__}"
                         f"(classifier, config) on the {table.key} table's classifier "
                         "architecture, untrained, before any network is trained)")
            raise
        except BaseException as err:
            raise MethodError(f"{method.name} raised {type(err).__name__}: {err} while being "
                              f"built on the {table.key} table's classifier architecture "
                              "(not an Exception: a method raises an Exception)") from None
        _untouched(clf, before, method.name, f"the {table.key} table's classifier "
                   "architecture, untrained", "when built")
    if not isinstance(ex, Explainer):
        raise TypeError(f"{method.cls.__qualname__}(classifier, config) returned "
                        f"{type(ex).__name__}, not an explainer")


def state_of(classifier) -> dict:
    """What a user's method must leave as it found it: the classifier's weights (their
    fingerprint) and the hooks on any of its modules (a hook changes what it computes
    without touching a weight), torch's gradient mode, default dtype and global RNG."""
    from cflib.cache import fingerprint

    hooks = []
    for mod_name, mod in classifier.named_modules():
        for kind in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                     "_backward_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks"):
            for key in getattr(mod, kind, {}) or {}:
                hooks.append(f"{kind.strip('_')} on {mod_name or 'the model'} ({key})")
    # a method (forward above all) replaced on a module's instance, or its class swapped,
    # changes what it computes without a weight or a hook: each module's own callables
    patched = {mod_name or "the model": (type(mod), sorted(
        (k, id(v)) for k, v in vars(mod).items()
        if callable(v) and not isinstance(v, (torch.nn.Module, type))))
        for mod_name, mod in classifier.named_modules()}
    return {"weights": fingerprint(classifier), "hooks": hooks, "patched": patched,
            "grad mode": torch.is_grad_enabled(), "default dtype": torch.get_default_dtype(),
            "default device": torch.get_default_device(),
            "rng": torch.random.get_rng_state()}


def _untouched(classifier, before: dict, name: str, where: str, when: str) -> None:
    """A :class:`MethodError` when the method changed the classifier it explains (its
    weights, or a hook left on it) or torch's global settings (gradient mode, default
    dtype): every later row and the judges are measured with them, so the run stops; the
    global settings are put back first.  Draws from the global RNG are undone."""
    now = state_of(classifier)
    changed = []
    if now["weights"] != before["weights"]:
        changed.append(f"the weights of the classifier it explains, in place (fingerprint "
                       f"{before['weights']} became {now['weights']}); change a copy "
                       "(copy.deepcopy) instead")
    extra = [h for h in now["hooks"] if h not in before["hooks"]]
    if extra:
        changed.append(f"a hook left on the classifier ({'; '.join(extra[:3])}); remove it "
                       "(handle.remove()) before returning")
    swapped = [m for m, v in now["patched"].items() if before["patched"].get(m) != v]
    if swapped:
        changed.append(f"the code of the classifier it explains (a method such as forward "
                       f"replaced on {', '.join(swapped[:3])}, or its class); wrap a copy "
                       "(copy.deepcopy) instead")
    if now["default device"] != before["default device"]:
        torch.set_default_device(before["default device"])
        changed.append(f"torch's default device ({before['default device']} -> "
                       f"{now['default device']})")
    if now["grad mode"] != before["grad mode"]:
        torch.set_grad_enabled(before["grad mode"])
        changed.append(f"torch's gradient mode ({before['grad mode']} -> {now['grad mode']})")
    if now["default dtype"] != before["default dtype"]:
        torch.set_default_dtype(before["default dtype"])
        changed.append(f"torch's default dtype ({before['default dtype']} -> "
                       f"{now['default dtype']})")
    if not torch.equal(now["rng"], before["rng"]):
        # drawing from the global RNG (a network built in a method's __init__) is allowed;
        # the draws are undone, so the rows that follow draw as they would without it
        torch.random.set_rng_state(before["rng"])
    if changed:
        raise MethodError(f"{name} changed {'; and '.join(changed)}, {when} on {where}; the "
                          "rows that follow and the book's reference rows are measured "
                          "after it, so the run stops here.  A method must leave the model "
                          "it explains and torch's global state as it found them")


def _guard(ex: Explainer, name: str, where: str, classifier=None,
           before: dict | None = None) -> Explainer:
    """``ex`` whose explain re-raises any failure (an exit too) as a :class:`MethodError`
    naming the method and ``where`` (the table and pair), and, given the ``classifier``
    and its state ``before`` (:func:`state_of`), refuses a method that changed it or
    torch's global state."""
    explain = ex.explain

    def guarded(*args, **kwargs):
        try:
            out = explain(*args, **kwargs)
        except SystemExit as err:
            raise MethodError(f"{name} called sys.exit({err.code!r}) on {where}: a method "
                              "returns counterfactuals or raises an error") from None
        except _PASSES:
            raise
        except BaseException as err:
            raise MethodError(f"{name} failed on {where}: {type(err).__name__}: {err}") from err
        if classifier is not None:
            _untouched(classifier, before, name, where, "while explaining")
        return out

    ex.explain = guarded
    return ex


def _fit(ex: Explainer, name: str, where: str, x_query, x_target, pair) -> Explainer:
    params = inspect.signature(ex.fit).parameters
    takes_pair = "pair" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    try:
        out = ex.fit(x_query, x_target, pair=pair) if takes_pair else ex.fit(x_query, x_target)
    except SystemExit as err:
        raise MethodError(f"{name} called sys.exit({err.code!r}) while fitting on {where}"
                          ) from None
    except _PASSES:
        raise
    except BaseException as err:
        raise MethodError(f"{name} failed to fit on {where}: {type(err).__name__}: {err} "
                          "(a method with needs_fit is fitted with fit(x_query, x_target"
                          "[, pair=(query, target)]))") from err
    ex = out if isinstance(out, Explainer) else ex
    if not ex.fitted:
        raise MethodError(f"{name}.fit on {where} left it unfitted: a method with needs_fit "
                          "holds what it learned in its fit_record (a FitRecord) when fit "
                          "returns")
    return ex


def entry(method: Method, table: TableSpec) -> catalog.Entry:
    """The catalog entry of the user's method for one table's run."""
    def build(r: catalog.Request) -> Explainer:
        if table.per_pair:
            q, t = r.need_pair(method.name)
            where = f"table {table.key}, pair {q}->{t}"
        else:
            where = f"table {table.key}"
        before = state_of(r.classifier)
        try:
            ex = method.build(r.classifier)
        except SystemExit as err:
            raise MethodError(f"{method.name} called sys.exit({err.code!r}) when built on "
                              f"{where}") from None
        except _PASSES:
            raise
        except BaseException as err:
            raise MethodError(f"{method.name} could not be built on {where}: "
                              f"{type(err).__name__}: {err}") from err
        _untouched(r.classifier, before, method.name, where, "when built")
        if ex.needs_fit:
            n = r.sizes.c3lt_subset
            xq = r.class_images(method.name, q, n, r.seeds("c3lt")).to(r.device)
            xt = r.class_images(method.name, t, n, r.seeds("c3lt_target_draw")).to(r.device)
            ex = _fit(ex, method.name, where, xq, xt, (q, t))
            _untouched(r.classifier, before, method.name, where, "while fitting")
        return _guard(ex, method.name, where, r.classifier, before)

    return catalog.Entry(method.name, method.cls, table.per_pair, build, table.kind,
                         searches=True)
