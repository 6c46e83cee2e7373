"""``python -m byoc_workbench.cli``: the same as ``byoc-workbench``."""

import sys

from byoc_workbench.cli import main

sys.exit(main())
