from bsprof.cli import main

main()
