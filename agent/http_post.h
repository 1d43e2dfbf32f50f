// One JSON POST over HTTP(S) through libcurl, for the senders that run on threads of their own
// (the incident webhook, the OTLP export): a whole-request time limit, no signals, http and
// https only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace stallwatch::agent {

struct JsonPost {
  std::string url;
  const std::string* body = nullptr;
  std::vector<std::string> headers;  // more "Name: value" lines (Content-Type is set)
  std::chrono::milliseconds timeout = std::chrono::seconds(5);
};

// Empty on a 2xx answer, else why not ("Couldn't connect to server", "HTTP status 503").
std::string postJson(const JsonPost& post);

// The URL as logs may show it: scheme and host only. Chat webhooks carry their secret in the
// path (https://hooks.slack.com/services/T0/B0/SECRET) or as user:password; neither is said.
std::string redactUrl(const std::string& url);

}  // namespace stallwatch::agent
