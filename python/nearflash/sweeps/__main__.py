"""`python -m nearflash.sweeps`: runs one point (JSON on stdin, its row as JSON on stdout); see `point.main`."""

import sys

from nearflash.sweeps.point import main

sys.exit(main())
