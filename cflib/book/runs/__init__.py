"""Execute the book's chapters once, keep what they made, re-execute only what changed.

* :mod:`~cflib.book.runs.paths`: where the book's own run and every other run write;
* :mod:`~cflib.book.runs.notebook`: a chapter's source as a notebook, cleaned for the page;
* :mod:`~cflib.book.runs.digests`: the inputs of a run and whether a chapter is stale;
* :mod:`~cflib.book.runs.execute`: one chapter through papermill, installed atomically;
* :mod:`~cflib.book.runs.assemble`: the whole book (stale chapters, then Jupyter Book).

    python -m cflib.book.runs mnist_eval --profile standard [-p n_images 100] ...
    python -m cflib.book.runs all --stale-only      # what `make book` runs
"""
