"""The systemd notify protocol (``sd_notify``), without a dependency; and the
descriptor limit a systemd service starts with.

Why by hand: it is one datagram to ``$NOTIFY_SOCKET``; outside systemd the
variable is unset and every call is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket


def notify(*lines: str) -> bool:
    """Send e.g. ``notify("READY=1", "STATUS=indexed 120 notes")``; False outside systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(target)
            sock.sendall("\n".join(lines).encode())
        return True
    except OSError:
        return False


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings (half systemd's WatchdogSec), or None."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000


def more_descriptors() -> None:
    """Raise the soft open-files limit toward the hard one (systemd's default soft
    limit is 1,024), so the watcher and the store keep descriptors in reserve."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(want, 65536)), hard))
