"""``python -m byoc_workbench.cli``: the same as ``byoc-workbench`` (its entry point's handling of signals included)."""

import sys

from byoc_workbench_cli import main

sys.exit(main())
