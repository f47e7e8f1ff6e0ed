"""The torch.backends entry point: `import torch` calls autoload(), so FUSER_ENABLE=1
works with no import of fuser in user code.

Installed as its own top-level package, `fuser_autoload`, so that torch loading the
entry point imports nothing of fuser: importing `fuser` loads its C++ extension, and a
missing or mismatched build must not break `import torch`. Nothing here may raise.
"""

from __future__ import annotations

import os
import warnings


def autoload() -> None:
    if os.environ.get("FUSER_ENABLE") is None and os.environ.get("FUSER_DISABLE") is None:
        return  # nothing asked of us: stay out of torch's import entirely
    try:
        import fuser
        from fuser import config

        if config.enable_at_import() and not config.killed():
            fuser.enable()
    except Exception as err:  # a broken install must not break torch
        warnings.warn(f"fuser: could not enable at import: {err}", RuntimeWarning, stacklevel=2)
