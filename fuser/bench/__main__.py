"""`python -m fuser.bench`: see fuser.bench.cli."""

from fuser.bench.cli import main

raise SystemExit(main())
