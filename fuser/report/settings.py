"""The settings a report runs under: shown in its header, applied for its run only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from fuser import _C
from fuser.report.model import Settings


def current_settings() -> Settings:
    min_size = 1 if _C.keep_singletons() else _C.get_min_group_size()
    return Settings(
        min_group_size=min_size,
        max_groups=_C.get_max_groups(),
        arg_limit=_C.get_arg_limit(),
        devices=tuple(_C.fused_devices()),
    )


@contextlib.contextmanager
def applied(
    min_group_size: int | None, max_groups: int | None, arg_limit: int | None
) -> Iterator[Settings]:
    """Sets the given values (None keeps the current one) and restores the old ones after."""
    before = (_C.get_min_group_size(), _C.get_max_groups(), _C.get_arg_limit())
    try:
        if min_group_size is not None:
            _C.set_min_group_size(int(min_group_size))
        if max_groups is not None:
            _C.set_max_groups(int(max_groups))
        if arg_limit is not None:
            _C.set_arg_limit(int(arg_limit))
        yield current_settings()
    finally:
        _C.set_min_group_size(before[0])
        _C.set_max_groups(before[1])
        _C.set_arg_limit(before[2])


def check_devices(devices: Sequence[str] | None) -> None:
    """The fused devices are read once from FUSER_DEVICES; a report cannot change them, so
    asking for others raises rather than report something it did not do."""
    if devices is None:
        return
    fused = set(_C.fused_devices())
    if set(devices) != fused:
        raise ValueError(
            f"devices {sorted(devices)} differ from the fused devices {sorted(fused)}; "
            "set FUSER_DEVICES before the process starts"
        )
