from cflib.book.report.readme import main

main()
