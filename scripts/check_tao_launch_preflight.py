#!/usr/bin/env python
"""Preflight of a TAO launch: the `skillbank preflight` command as a script, with the same flags."""

import sys

from skillbank.commands.preflight import main

if __name__ == "__main__":
    sys.exit(main())
