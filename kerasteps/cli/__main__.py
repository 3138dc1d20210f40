"""`python -m kerasteps.cli`: the launcher."""

from kerasteps.cli import main

main()
