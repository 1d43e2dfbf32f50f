"""Unit tests of the stallwatch Python package against a socket the test owns."""

import contextlib
import io
import os
import socket
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import stallwatch  # noqa: E402


class FakeTensor:
    def __init__(self, *shape):
        self.shape = shape


def parse(datagram):
    out = {}
    for line in datagram.decode().splitlines():
        name, rest = line.split(":", 1)
        value, kind = rest.split("|")[:2]
        out[name] = (float(value), kind)
    return out


class WatchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.path = os.path.join(self.tmp, "s.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.server.bind(self.path)
        self.server.settimeout(2)

    def tearDown(self):
        self.server.close()
        os.unlink(self.path)
        os.rmdir(self.tmp)

    def test_counts_steps_samples_and_times_waits(self):
        def slow():
            for i in range(5):
                time.sleep(0.02)
                yield [FakeTensor(32, 3), FakeTensor(32)]

        reporter = stallwatch.Reporter(socket_path=self.path, flush_seconds=60)
        for _ in stallwatch.watch(slow(), reporter=reporter):
            time.sleep(0.01)
        metrics = parse(self.server.recv(8192))
        self.assertEqual(metrics["stallwatch.dataloader.steps"], (5.0, "c"))
        self.assertEqual(metrics["stallwatch.dataloader.samples"], (160.0, "c"))
        wait_ms, kind = metrics["stallwatch.dataloader.wait"]
        self.assertEqual(kind, "ms")
        self.assertAlmostEqual(wait_ms, 100.0, delta=15.0)
        self.assertAlmostEqual(metrics["stallwatch.dataloader.step"][0], 50.0, delta=15.0)

    def test_an_agent_behind_gets_the_steps_later_not_never(self):
        """The kernel keeps few datagrams on a Unix socket (net.unix.max_dgram_qlen, 10 by
        default): with the agent behind, a report that does not fit goes with the next one, added
        to it, instead of being dropped (an ASan agent under load lost 2-4 of 30 steps)."""
        reporter = stallwatch.Reporter(socket_path=self.path, flush_seconds=0)
        for _ in range(200):  # far past the queue: most sends find it full
            reporter.record_step(0.001, 0.002, 4)
        self.assertGreater(reporter.deferred, 0)
        self.assertEqual(reporter.dropped, 0)
        steps = samples = 0
        self.server.settimeout(0.2)
        while True:  # the agent catches up
            try:
                m = parse(self.server.recv(8192))
            except socket.timeout:
                break
            steps += m["stallwatch.dataloader.steps"][0]
            samples += m["stallwatch.dataloader.samples"][0]
        reporter.record_step(0.001, 0.002, 4)  # the next report carries what did not fit
        m = parse(self.server.recv(8192))
        steps += m["stallwatch.dataloader.steps"][0]
        samples += m["stallwatch.dataloader.samples"][0]
        self.assertEqual((steps, samples), (201, 804))

    def test_flushes_at_most_every_flush_interval(self):
        reporter = stallwatch.Reporter(socket_path=self.path, flush_seconds=0.05)
        for _ in stallwatch.watch(range(1000), reporter=reporter):
            pass
        self.server.settimeout(0.2)
        datagrams = []
        try:
            while True:
                datagrams.append(parse(self.server.recv(8192)))
        except socket.timeout:
            pass
        self.assertLessEqual(len(datagrams), 3)  # 1000 fast steps: one flush at the end, maybe two
        self.assertEqual(sum(d["stallwatch.dataloader.steps"][0] for d in datagrams), 1000)

    def test_manual_loop_with_context_managers(self):
        reporter = stallwatch.Reporter(socket_path=self.path, flush_seconds=60)
        it = iter(range(3))
        for _ in range(3):
            with reporter.fetching():
                time.sleep(0.01)
                next(it)
            with reporter.stepping(samples=4):
                pass
        reporter.flush()
        metrics = parse(self.server.recv(8192))
        self.assertEqual(metrics["stallwatch.dataloader.steps"][0], 3)
        self.assertEqual(metrics["stallwatch.dataloader.samples"][0], 12)
        self.assertAlmostEqual(metrics["stallwatch.dataloader.wait"][0], 30.0, delta=10.0)

    def test_batch_sizes(self):
        self.assertEqual(stallwatch._batch_size(FakeTensor(8, 3)), 8)
        self.assertEqual(stallwatch._batch_size((FakeTensor(16), FakeTensor(16))), 16)
        self.assertEqual(stallwatch._batch_size({"x": FakeTensor(4, 2)}), 4)
        self.assertEqual(stallwatch._batch_size([1, 2, 3]), 3)
        self.assertEqual(stallwatch._batch_size(object()), 0)
        self.assertEqual(stallwatch._batch_size(FakeTensor()), 0)


class NoAgentTest(unittest.TestCase):
    def test_never_raises_without_an_agent(self):
        reporter = stallwatch.Reporter(socket_path="/nonexistent/dir/s.sock", flush_seconds=0)
        items = list(stallwatch.watch(range(100), reporter=reporter))
        self.assertEqual(items, list(range(100)))
        self.assertEqual(reporter.sent, 0)
        self.assertGreater(reporter.dropped, 0)

    def test_a_dead_socket_file_does_not_raise(self):
        tmp = tempfile.mkdtemp()
        path = os.path.join(tmp, "dead.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        s.close()  # the file stays, nobody listens: ECONNREFUSED
        try:
            reporter = stallwatch.Reporter(socket_path=path, flush_seconds=0)
            self.assertEqual(len(list(stallwatch.watch(range(10), reporter=reporter))), 10)
            self.assertEqual(reporter.sent, 0)
        finally:
            os.unlink(path)
            os.rmdir(tmp)

    def test_every_candidate_is_tried_until_one_takes_the_datagram(self):
        tmp = tempfile.mkdtemp()
        dead, live = os.path.join(tmp, "dead.sock"), os.path.join(tmp, "live.sock")
        d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        d.bind(dead)
        d.close()  # a socket file nobody listens on, as a stopped agent leaves it
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        agent.bind(live)
        try:
            reporter = stallwatch.Reporter(socket_path=["/nonexistent/a.sock", dead, live], flush_seconds=0)
            list(stallwatch.watch(range(3), reporter=reporter))
            self.assertGreater(reporter.sent, 0)
            self.assertFalse(reporter.warned)
            agent.settimeout(1)
            self.assertIn(b"stallwatch.dataloader.steps:", agent.recv(4096))
        finally:
            agent.close()
            for p in (dead, live):
                os.unlink(p)
            os.rmdir(tmp)

    def test_no_agent_is_said_once_on_stderr(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            reporter = stallwatch.Reporter(socket_path=["/nonexistent/a.sock", "/nonexistent/b.sock"],
                                           flush_seconds=0)
            reporter._down_until = 0
            for _ in range(5):
                reporter.record_step(0.01, 0.01)
                reporter._down_until = 0  # as if the retry delay had passed each time
                reporter.flush()
        self.assertTrue(reporter.warned)
        self.assertEqual(err.getvalue().count("no agent took the dataloader's report"), 1)
        self.assertIn("/nonexistent/a.sock", err.getvalue())
        self.assertIn("/nonexistent/b.sock", err.getvalue())

    def test_errors_in_the_iterable_propagate_unchanged(self):
        def broken():
            yield 1
            raise ValueError("boom")

        with self.assertRaises(ValueError):
            list(stallwatch.watch(broken(), reporter=stallwatch.Reporter(socket_path="/nonexistent")))


if __name__ == "__main__":
    unittest.main()
