from brutus.cli import main

main()
