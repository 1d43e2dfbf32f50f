"""Report a training loop's input-pipeline health to a running stallwatch agent.

    import stallwatch
    for batch in stallwatch.watch(loader):
        train_step(batch)

Per step this measures the time the loop waited for its next batch and the time spent in the
step, counts batches and samples, and sends them as StatsD lines over the agent's Unix
datagram socket, aggregated at most every 0.1 s. With no agent listening it costs a couple of
clock reads per step; it never raises, blocks or slows the loop. Standard library only.

For loops that are not a plain `for`:

    reporter = stallwatch.Reporter()
    while training:
        with reporter.fetching():
            batch = next(it)
        with reporter.stepping():
            train_step(batch)
    # or reporter.record_step(wait_seconds, step_seconds, samples)

The socket is $STALLWATCH_SOCKET if set; otherwise each of /run/stallwatch/dataloader.sock
(an agent running as root), $XDG_RUNTIME_DIR/stallwatch/dataloader.sock and
/tmp/stallwatch-<uid>/dataloader.sock is tried in turn until one takes the datagram. When
none does (no agent, or a socket this user may not write: see docs/DATALOADER.md for the
group that may), one warning says so on stderr, once per process, and the loop goes on.
Wire format: docs/DATALOADER.md.
"""

import atexit
import contextlib
import os
import socket
import sys
import threading
import time

__all__ = ["watch", "Reporter", "default_reporter"]
__version__ = "0.2.0"

_FLUSH_SECONDS = 0.1
_RETRY_SECONDS = 5.0


def _socket_candidates():
    explicit = os.environ.get("STALLWATCH_SOCKET")
    if explicit:
        return [explicit]
    paths = ["/run/stallwatch/dataloader.sock"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        paths.append(os.path.join(runtime, "stallwatch", "dataloader.sock"))
    paths.append(f"/tmp/stallwatch-{os.getuid()}/dataloader.sock")
    return paths


def _batch_size(batch):
    """The number of samples in a batch: the first dimension of its first tensor-like part,
    or the length of a list of plain items; 0 where it cannot tell."""
    try:
        shape = getattr(batch, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(batch, dict) and batch:
            return _batch_size(next(iter(batch.values())))
        if isinstance(batch, (list, tuple)) and batch:
            first = batch[0]
            if getattr(first, "shape", None) is not None or isinstance(first, (list, tuple, dict)):
                return _batch_size(first)
            return len(batch)
    except Exception:  # an odd batch type must never break the loop
        pass
    return 0


class Reporter:
    """Accumulates steps and sends them to the agent. Thread-safe; never raises."""

    def __init__(self, socket_path=None, flush_seconds=_FLUSH_SECONDS):
        # One path, or a list of candidates tried in turn; none: the default candidates.
        if isinstance(socket_path, (list, tuple)):
            self._paths = list(socket_path)
        else:
            self._paths = [socket_path] if socket_path else None
        self._flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._sock = None
        self._target = None
        self._down_until = 0.0
        self._last_flush = time.monotonic()
        self._steps = 0
        self._samples = 0
        self._wait = 0.0
        self._step = 0.0
        self.sent = 0
        self.dropped = 0   # reports nobody took (no agent): their steps are lost
        self.deferred = 0  # reports an agent was too busy for: their steps go with the next
        self.warned = False  # said once that no agent takes the datagrams
        self._fetch_started = None
        self._step_started = None

    def record_step(self, wait_seconds, step_seconds, samples=0):
        """Adds one step: the wait for its data, the step itself, its sample count."""
        with self._lock:
            self._steps += 1
            self._samples += samples
            self._wait += wait_seconds
            self._step += step_seconds
            now = time.monotonic()
            if now - self._last_flush >= self._flush_seconds:
                self._flush_locked(now)

    @contextlib.contextmanager
    def fetching(self):
        """Times the wait for the next batch (use around next(iterator))."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._fetch_started = time.perf_counter() - start

    @contextlib.contextmanager
    def stepping(self, samples=0):
        """Times one step; with fetching() before it, records the step."""
        start = time.perf_counter()
        try:
            yield
        finally:
            wait = self._fetch_started or 0.0
            self._fetch_started = None
            self.record_step(wait, time.perf_counter() - start, samples)

    def flush(self):
        with self._lock:
            self._flush_locked(time.monotonic())

    def _flush_locked(self, now):
        self._last_flush = now
        if self._steps == 0:
            return
        payload = (
            f"stallwatch.dataloader.steps:{self._steps}|c\n"
            f"stallwatch.dataloader.samples:{self._samples}|c\n"
            f"stallwatch.dataloader.wait:{self._wait * 1000.0:.3f}|ms\n"
            f"stallwatch.dataloader.step:{self._step * 1000.0:.3f}|ms\n"
        ).encode()
        # An agent that is behind (its queue full: the kernel keeps few datagrams a socket) gets
        # these steps with the next report, added to it; a report nobody takes is dropped.
        if self._send_locked(payload, now) != "busy":
            self._steps = self._samples = 0
            self._wait = self._step = 0.0

    def _send_locked(self, payload, now):
        """Sends PAYLOAD: "sent", "busy" (an agent that will take it later) or "none"."""
        if now < self._down_until:
            self.dropped += 1
            return "none"
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
        except OSError:
            self.dropped += 1
            self._down_until = now + _RETRY_SECONDS
            return "none"
        if self._target is not None:
            try:
                self._sock.sendto(payload, self._target)
                self.sent += 1
                return "sent"
            except (BlockingIOError, InterruptedError):
                self.deferred += 1  # the agent is behind: sent with the next report, not waited for
                return "busy"
            except OSError:
                self._target = None  # the agent went away: look for one again below
        # Every candidate in turn: the first that takes the datagram is the agent's.
        failures = []
        for path in self._paths or _socket_candidates():
            try:
                self._sock.sendto(payload, path)
            except (BlockingIOError, InterruptedError):
                self._target = path  # an agent, busy: keep it
                self.deferred += 1
                return "busy"
            except OSError as e:
                failures.append(f"{path}: {e.strerror or e}")
                continue
            self._target = path
            self.sent += 1
            return "sent"
        self.dropped += 1
        self._down_until = now + _RETRY_SECONDS
        if not self.warned:
            self.warned = True
            try:
                sys.stderr.write(
                    "stallwatch: no agent took the dataloader's report, steps are not recorded ("
                    + "; ".join(failures) + "). The loop is not affected.\n")
            except Exception:
                pass
        return "none"


_default = None
_default_lock = threading.Lock()


def default_reporter():
    global _default
    with _default_lock:
        if _default is None:
            _default = Reporter()
            atexit.register(_default.flush)
        return _default


def watch(iterable, reporter=None, samples=None):
    """Yields from ITERABLE, timing each wait for an item and each step between items.

    SAMPLES: a function giving a batch's sample count (default: the first dimension of the
    batch's first tensor, or len() of a list batch)."""
    reporter = reporter or default_reporter()
    count = samples or _batch_size
    clock = time.perf_counter
    iterator = iter(iterable)
    try:
        while True:
            fetch_start = clock()
            try:
                item = next(iterator)
            except StopIteration:
                return
            fetched = clock()
            yield item
            try:
                n = count(item)
            except Exception:
                n = 0
            reporter.record_step(fetched - fetch_start, clock() - fetched, n)
    finally:
        reporter.flush()
