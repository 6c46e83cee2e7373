import sys

from byoc_workbench.cli import main

sys.exit(main())
