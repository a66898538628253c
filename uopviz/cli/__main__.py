"""`python -m uopviz.cli ...` is the `uopviz` command."""

import sys

from uopviz.cli import main

sys.exit(main())
