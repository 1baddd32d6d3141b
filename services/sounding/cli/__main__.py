from sounding.cli import main

main()
