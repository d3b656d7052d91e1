"""The benchmark harness: what the book's tables need beyond the library.

It knows the datasets and their class pairs (:mod:`~cflib.bench.data`), the sizes of
each profile (:mod:`~cflib.bench.profiles`), the seeds by role
(:mod:`~cflib.bench.seeds`), the book's trained networks (:mod:`~cflib.bench.zoo`), the
choices made on validation data (:mod:`~cflib.bench.tuning`), one catalog of methods
(:mod:`~cflib.bench.catalog`), one runner protocol (:mod:`~cflib.bench.runner`) and the
three tables built on it (:mod:`cflib.bench.tables`), the results schema
(:mod:`~cflib.bench.results`) and the papers' numbers (:mod:`~cflib.bench.reference`),
and runs a user's method through a table's protocol beside the book's rows
(:mod:`~cflib.bench.compare`).  It imports the library (:mod:`cflib`'s core), never the
book.
"""
