"""`python -m ssmbench` runs the CLI (prefer the `ssmbench` console script)."""

from ssmbench.cli import main

main()
