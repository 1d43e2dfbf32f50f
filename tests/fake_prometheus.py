"""A small Prometheus query API for the tests of `report --prometheus` against a hostile or
broken server (issue 46): it answers the queries prometheus/fleet_source.cpp sends for one run of
two nodes, each with one job stepping 10 times a second at 90 % GPU utilisation over RUN_S
seconds from T0, and SCENARIO bends the answers:
  healthy      as above
  nan          every job figure NaN
  negative     every job figure negative, and the job's GPU count -1
  duplicate    every series sent twice in one answer, the second x10
  inf_spacing  the samples' count over the spacing window +Inf (the scrape interval's source)
  bad_counter  the agents' interval counter rising 1000x too slowly
Usage: server, url = serve(scenario, t0_s, run_s); server.shutdown() when done."""
import http.server
import json
import re
import threading
import urllib.parse

RUN = "slurm:4646"
NODES = [("n0", "10.0.0.1:9877", "slurm:4646"), ("n1", "10.0.0.2:9877", "slurm:4646")]


def _value(v):
    if v != v:
        return "NaN"
    if v == float("inf"):
        return "+Inf"
    if v == float("-inf"):
        return "-Inf"
    return repr(float(v))


class _Handler(http.server.BaseHTTPRequestHandler):
    scenario, t0, run_s = "healthy", 0.0, 60

    def log_message(self, *args):
        pass

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        expr, start, end, step = q["query"][0], float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
        result = self.answer(expr, start, end, step)
        if self.scenario == "duplicate":
            result = result + [{"metric": r["metric"], "values": [[t, _value(float(v) * 10)] for t, v in r["values"]]}
                               for r in result]
        body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def points(self, start, end, step, value):
        out, k = [], 0
        while start + k * step <= end + 1e-9:
            t = start + k * step
            if self.t0 <= t <= self.t0 + self.run_s:
                out.append([round(t, 3), _value(value)])
            k += 1
        return out

    def per_node(self, expr, start, end, step, value, labels=("node", "instance", "training_job")):
        out = []
        for node, instance, job in NODES:
            if "instance=" in expr and f'instance="{instance}"' not in expr:
                continue
            metric = dict(zip(("node", "instance", "training_job"), (node, instance, job)))
            metric = {k: v for k, v in metric.items() if k in labels}
            pts = self.points(start, end, step, value)
            if pts:
                out.append({"metric": metric, "values": pts})
        return out

    def answer(self, expr, start, end, step):
        job_value = {"nan": float("nan"), "negative": -5.0}.get(self.scenario)
        if expr.startswith("max by (run, node, instance, training_job, world_size)"):
            return [{"metric": {"run": RUN, "node": n, "instance": i, "training_job": j, "world_size": "2"},
                     "values": self.points(start, end, step, 1)} for n, i, j in NODES]
        if expr.startswith("count_over_time(stallwatch_run_job_info"):
            window = int(re.search(r"\[(\d+)s\]", expr).group(1))
            v = float("inf") if self.scenario == "inf_spacing" else window
            return [{"metric": {"instance": i}, "values": [[start, _value(v)]]} for _, i, _ in NODES]
        if expr.startswith("rate(stallwatch_intervals_total"):
            v = 0.001 if self.scenario == "bad_counter" else 1.0
            return [{"metric": {"instance": i}, "values": [[start, _value(v)]]} for _, i, _ in NODES]
        if expr.startswith("max by (node) (stallwatch_run_job_info"):
            return self.per_node(expr, start, end, step, 1, labels=("node",))
        if expr.startswith("stallwatch_run_job_info{"):
            return self.per_node(expr, start, end, step, 1)
        for metric, value in (("stallwatch_job_steps_per_second", 10.0),
                              ("stallwatch_job_gpu_utilization_ratio", 0.9),
                              ("stallwatch_job_gpus", -1.0 if self.scenario == "negative" else 1.0)):
            if expr.startswith(metric + "{"):
                v = value if metric == "stallwatch_job_gpus" or job_value is None else job_value
                return self.per_node(expr, start, end, step, v)
        return []


def serve(scenario, t0_s, run_s=60):
    handler = type("Handler", (_Handler,), {"scenario": scenario, "t0": float(t0_s), "run_s": run_s})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
