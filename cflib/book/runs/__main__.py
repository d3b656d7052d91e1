"""``python -m cflib.book.runs``: the chapter builder's command line."""
from cflib.book.runs.cli import main

main()
