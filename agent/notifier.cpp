#include "agent/notifier.h"

#include <spdlog/spdlog.h>

#include "agent/incident_payload.h"

namespace stallwatch::agent {

Notifier::Notifier(std::string host, std::chrono::milliseconds repeat_window, HookRunner* hooks,
                   WebhookSender* webhook)
    : host_(std::move(host)), repeat_window_(repeat_window), hooks_(hooks), webhook_(webhook) {}

bool Notifier::notify(const model::IncidentEvent& e) {
  const auto& i = e.incident;
  const std::string key = e.job_key + "|" + model::toString(i.cls) + "|" + i.device;
  if (e.kind == model::IncidentEventKind::kOpen) {
    auto it = last_open_ms_.find(key);
    if (it != last_open_ms_.end() && e.ts_ms - it->second < repeat_window_.count()) {
      suppressed_ids_.insert(e.live_id);
      ++stats_.suppressed;
      spdlog::info("incident {}: same stall as {:.0f} s ago ({}); not notified again", e.live_id,
                   static_cast<double>(e.ts_ms - it->second) / 1000.0, key);
      return false;
    }
    last_open_ms_[key] = e.ts_ms;
    // Keys of long-gone stalls need not be kept.
    for (auto k = last_open_ms_.begin(); k != last_open_ms_.end();) {
      k = e.ts_ms - k->second > 2 * repeat_window_.count() ? last_open_ms_.erase(k) : std::next(k);
    }
  } else if (suppressed_ids_.count(e.live_id)) {
    if (e.kind == model::IncidentEventKind::kClose) suppressed_ids_.erase(e.live_id);
    ++stats_.suppressed;
    return false;
  }
  if (hooks_) hooks_->submit(incidentJson(e, host_), incidentEnvironment(e, host_));
  if (webhook_) webhook_->submit(webhookBody(e, host_));
  ++stats_.sent;
  return true;
}

}  // namespace stallwatch::agent
