"""Execute the book's chapters once, keep what they made, re-execute only what changed.

* :mod:`~cflib.book.build.paths`: where the book's own run and every other run write;
* :mod:`~cflib.book.build.notebook`: a chapter's source as a notebook, cleaned for the page;
* :mod:`~cflib.book.build.digests`: the inputs of a run and whether a chapter is stale;
* :mod:`~cflib.book.build.execute`: one chapter through papermill, installed atomically;
* :mod:`~cflib.book.build.assemble`: the whole book (stale chapters, then Jupyter Book).

    python -m cflib.book.build mnist_eval --profile standard [-p n_images 100] ...
    python -m cflib.book.build all --stale-only      # what `make book` runs
"""
