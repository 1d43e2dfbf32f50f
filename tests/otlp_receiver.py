"""An OTLP/HTTP metrics receiver for the tests: POST /v1/metrics with a JSON body, each request
checked against tests/otlp/metrics.schema.json (opentelemetry-proto's messages in the JSON
mapping OTLP/HTTP uses) and against what the schema cannot say (a histogram's buckets one more
than its bounds and summing to its count; a point's time after its start). A request that
passes is kept and answered 200; one that does not is kept with why, and answered 400."""

import http.server
import json
import os
import threading

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "otlp", "metrics.schema.json")


def semantic_problems(request):
    problems = []
    for rm in request.get("resourceMetrics", []):
        for sm in rm.get("scopeMetrics", []):
            for m in sm.get("metrics", []):
                data = m.get("gauge") or m.get("sum") or m.get("histogram") or {}
                for p in data.get("dataPoints", []):
                    if "startTimeUnixNano" in p and int(p["startTimeUnixNano"]) > int(p["timeUnixNano"]):
                        problems.append(f"{m['name']}: starts after its time")
                    if "histogram" in m:
                        counts = [int(c) for c in p["bucketCounts"]]
                        if len(counts) != len(p["explicitBounds"]) + 1:
                            problems.append(f"{m['name']}: {len(counts)} buckets for {len(p['explicitBounds'])} bounds")
                        if sum(counts) != int(p["count"]):
                            problems.append(f"{m['name']}: buckets sum to {sum(counts)}, count {p['count']}")
                        if p["explicitBounds"] != sorted(p["explicitBounds"]):
                            problems.append(f"{m['name']}: bounds out of order")
    return problems


class Receiver:
    def __init__(self):
        with open(SCHEMA) as f:
            self.validator = jsonschema.Draft202012Validator(json.load(f))
        self.accepted, self.refused, self.paths, self.headers = [], [], [], []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.paths.append(self.path)
                receiver.headers.append(dict(self.headers))
                why = []
                try:
                    request = json.loads(body)
                    why = [e.message for e in receiver.validator.iter_errors(request)][:5]
                    why += semantic_problems(request) if not why else []
                except ValueError as e:
                    request, why = None, [f"not JSON: {e}"]
                if self.headers.get("Content-Type") != "application/json":
                    why.append(f"Content-Type {self.headers.get('Content-Type')}")
                (receiver.refused if why else receiver.accepted).append((request, why))
                self.send_response(400 if why else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def metrics_of(request):
    """{name: metric} of a request's one resource and scope."""
    return {m["name"]: m for m in request["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}


def attributes(items):
    return {a["key"]: a["value"]["stringValue"] for a in items}
