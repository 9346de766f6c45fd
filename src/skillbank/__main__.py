"""`python -m skillbank ...`: the same command line as the `skillbank` script."""

from skillbank.cli import main

raise SystemExit(main())
