"""``python -m byoc_workbench``: the same as ``byoc-workbench`` once the package (and TVM) has loaded; a Ctrl-C
while Python itself loads the package ends in Python's own traceback, so the command is ``byoc-workbench``."""

import sys

from byoc_workbench_cli import main

sys.exit(main())
