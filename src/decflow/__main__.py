from decflow.cli import main

main()
