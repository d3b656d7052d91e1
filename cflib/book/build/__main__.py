"""``python -m cflib.book.build``: the chapter builder's command line."""
from cflib.book.build.cli import main

main()
