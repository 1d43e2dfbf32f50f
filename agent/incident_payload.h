// How an incident event is told to the outside: JSON for hooks' standard input, environment
// variables for hooks, an Alertmanager-style webhook body, and one line of text for people.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "correlator/live_correlator.h"

namespace stallwatch::agent {

// "2026-11-22T03:53:10.123Z"
std::string isoTime(int64_t ms);

// One line: "stall opened: job 'python train.py' lost 92% of its GPU since 03:53:10Z;
// disk-slow on loop0 (on vda): await_ms loop0 41.2 vs 0.4 normal".
std::string incidentSummary(const model::IncidentEvent& event, const std::string& host);

// The event as a JSON object (the hook's standard input).
std::string incidentJson(const model::IncidentEvent& event, const std::string& host);

// NAME=VALUE pairs for the hook's environment, all prefixed STALLWATCH_.
std::vector<std::pair<std::string, std::string>> incidentEnvironment(
    const model::IncidentEvent& event, const std::string& host);

// Alertmanager's webhook format (version 4) with one alert, plus "text" for chat webhooks
// (Slack, Mattermost) and the full event under "stallwatch".
std::string webhookBody(const model::IncidentEvent& event, const std::string& host);

}  // namespace stallwatch::agent
