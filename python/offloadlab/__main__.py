from offloadlab.cli import main

main()
