"""`python -m dpvip.cli ...` (how torchrun starts the ranks of a multi-process run)."""

import sys

from dpvip.cli import main

sys.exit(main())
