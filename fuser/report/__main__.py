import sys

from fuser.report.cli import main

sys.exit(main())
