from cflib.report.readme import main

main()
