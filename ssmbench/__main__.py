"""`python -m ssmbench` runs the CLI (prefer the `ssmbench` console script; see design.md section 2)."""

from ssmbench.cli import main

main()
