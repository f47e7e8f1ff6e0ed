"""Shared test set-up. Flags that the core reads once must be set before fuser loads:
single-node groups are kept so that each operator can be tested through a kernel."""

import os

os.environ.setdefault("FUSER_SINGLETON", "1")
