// Fans incident events out to the hook and the webhook, with deduplication: a stall that
// closes and opens again with the same job, class and device within repeat_window is a
// flap, and its events are counted but not sent again (the correlator already holds one
// incident open across gaps shorter than its close_after_s; this catches longer flaps).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "agent/hook_runner.h"
#include "agent/webhook_sender.h"
#include "correlator/live_correlator.h"

namespace stallwatch::agent {

struct NotifierStats {
  uint64_t sent = 0;        // events handed to the hook and/or webhook
  uint64_t suppressed = 0;  // events of a flapping stall, not sent
};

class Notifier {
 public:
  Notifier(std::string host, std::chrono::milliseconds repeat_window, HookRunner* hooks,
           WebhookSender* webhook);

  // Never blocks: the hook and webhook queue the work. Returns false for a suppressed event.
  bool notify(const model::IncidentEvent& event);
  NotifierStats stats() const { return stats_; }
  // Where events go from now on (a reload); the flap memory stays.
  void setTargets(HookRunner* hooks, WebhookSender* webhook,
                  std::chrono::milliseconds repeat_window) {
    hooks_ = hooks;
    webhook_ = webhook;
    repeat_window_ = repeat_window;
  }

 private:
  std::string host_;
  std::chrono::milliseconds repeat_window_;
  HookRunner* hooks_;
  WebhookSender* webhook_;
  std::map<std::string, int64_t> last_open_ms_;  // by job|class|device
  std::set<uint64_t> suppressed_ids_;
  NotifierStats stats_;
};

}  // namespace stallwatch::agent
