"""A wall-clock stack sampler for one measured region (cold_timeline.py's children).

Every INTERVAL seconds a daemon thread takes `sys._current_frames()` and keeps each thread's
stack as indices into a table of "path:function" strings (innermost first), so the record
says where the wall time went, waits and imports included, which cProfile (CPU time of
Python calls, inflated by its own overhead) does not. The sampler takes the GIL once a
sample: at the default 5 ms, about what the interpreter's own switch interval costs.

    sampler = StackSampler().start()
    ...                      # the measured region
    sampler.stop().dump(path)
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time


def _short(path: str) -> str:
    """A frame's file as a package path: ".../site-packages/torch/_inductor/x.py" ->
    "torch/_inductor/x.py"; the repository's files from the repository root."""
    for marker in ("site-packages/", "dist-packages/", "/precompile_nb/", "/benchmarks/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):] if marker.endswith("-packages/") \
                else path[i + 1:]
    i = path.find("/lib/python3.")  # the standard library: "threading.py"
    return path[path.index("/", i + 13) + 1:] if i >= 0 and "/" in path[i + 13:] else path


class StackSampler:
    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.names: list[str] = []
        self._index: dict[tuple[str, str], int] = {}
        self.samples: list[tuple[float, int, list[int]]] = []  # (t, thread, stack)
        self.thread_names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stack-sampler")
        self.t0 = 0.0

    def start(self) -> StackSampler:
        self.t0 = time.perf_counter()
        self._thread.start()
        return self

    def _id(self, code) -> int:
        key = (code.co_filename, code.co_name)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.names)
            self.names.append(f"{_short(code.co_filename)}:{code.co_name}")
        return i

    def _run(self) -> None:
        me, main = threading.get_ident(), threading.main_thread().ident
        while not self._stop.is_set():
            t = time.perf_counter() - self.t0
            for tid, frame in sys._current_frames().items():
                if tid == me:
                    continue
                stack = []
                while frame is not None:
                    stack.append(self._id(frame.f_code))
                    frame = frame.f_back
                self.samples.append((round(t, 4), 0 if tid == main else tid, stack))
            self._stop.wait(self.interval)

    def stop(self) -> StackSampler:
        self._stop.set()
        self._thread.join()
        self.thread_names = {t.ident: t.name for t in threading.enumerate() if t.ident}
        return self

    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"interval": self.interval, "names": self.names, "pid": os.getpid(),
                       "threads": {str(k): v for k, v in self.thread_names.items()},
                       "samples": self.samples}, f)
