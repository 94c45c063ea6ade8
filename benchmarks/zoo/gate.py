"""One measurement at a time on the machine, the setups of the next ones around it.

A warm start or eager's first call is a fraction of a second, the process around it much
more (the interpreter, torch's and the model library's imports, the model's build: 22-37 s
a process on an H100). parallel.py --alone runs several such processes at once and each
holds the gate file: shared (flock LOCK_SH) from its start through its setup, exclusive
(LOCK_EX) for what it measures. An exclusive holder waits until no other process is in its
setup, and a process starting its setup waits while one measures, so a measurement runs with
every other phase process asleep in flock: the machine is as quiet as with one process at a
time, and the setups overlap each other.

    g = Gate(path)     # shared: the setup may run beside other setups
    g.measure()        # exclusive: nothing else runs until the process exits (or release())
"""
from __future__ import annotations

import fcntl
import os


class Gate:
    """The gate file held shared (setting up) or exclusive (measuring); None path: no-op."""

    def __init__(self, path: str | None):
        self.fd = None
        if path:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def measure(self) -> None:
        """Exclusive from here: waits for every other setup and measurement to end."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
