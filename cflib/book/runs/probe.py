"""What a chapter's kernel reports at the end of its run (its last cell): the cflib
definitions its compute cells ran and those its presentation cells ran
(:mod:`cflib.trace`), the cflib modules it imported, the data files and results files it
read and the shipped networks it loaded; one line on stdout, ``CFLIB_INPUTS{json}``, that
the run reads back and drops from the page."""
from __future__ import annotations

import json
import sys

from cflib import trace

MARK = "CFLIB_INPUTS"


def report(namespace: dict) -> None:
    from cflib.bench.data import files_read as data_read
    from cflib.bench.results import files_read as results_read
    from cflib.cache import networks_used

    present = trace.stop() if trace.active() else namespace.get("_cflib_present")
    compute = namespace.get("_cflib_segment")
    modules = sorted(m.__file__ for n, m in list(sys.modules.items())
                     if n.split(".")[0] == "cflib" and getattr(m, "__file__", None))
    used = networks_used()
    # the networks the compute loaded count with the code that trains them: a fresh clone
    # (an empty cache) trains them with it
    defs = trace.record(compute) if compute is not None else {}
    if compute is not None:
        for u in used:
            defs.update(u.get("code") or {})
    print(MARK + json.dumps({
        "modules": modules, "data": data_read(), "reads": results_read(),
        "definitions": dict(sorted(defs.items())),
        "presentation": trace.record(present) if present is not None else {},
        "networks": sorted({u["entry"] for u in used if u["origin"] == "shipped"}),
    }))
