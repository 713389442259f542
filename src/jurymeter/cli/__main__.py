from jurymeter.cli.app import main

main()
