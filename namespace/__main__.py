"""`python -m autograd_fix` runs the command-line tool."""

from autograd_fix.cli.entry import main

if __name__ == "__main__":
    main()
