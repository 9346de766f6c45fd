#!/usr/bin/env python3
"""DEFT gap analysis (the public entry point): results.json -> failures parquet.

Same as `skillbank gaps`; accepts the public flags --results-dir --gaps-parquet --kpi-ann-path
--kpi-media-path. All logic lives in skillbank.gaps.
"""

import sys

from skillbank.cli import main

if __name__ == "__main__":
    sys.exit(main(["gaps", *sys.argv[1:]]))
