#include "agent/otlp_exporter.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <ctime>

#include "agent/http_post.h"
#include "collectors/self_process.h"

namespace stallwatch::agent {

std::string otlpMetricsUrl(const std::string& endpoint) {
  if (endpoint.ends_with("/v1/metrics")) return endpoint;
  return (endpoint.ends_with("/") ? endpoint.substr(0, endpoint.size() - 1) : endpoint) +
         "/v1/metrics";
}

OtlpExporter::OtlpExporter(OtlpConfig config, const MetricsBoard& board, OtlpResource resource)
    : config_(std::move(config)),
      url_(otlpMetricsUrl(config_.endpoint)),
      board_(board),
      resource_(std::move(resource)) {
  thread_ = std::thread([this] { run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  spdlog::info("otlp {}: {} exports, {} failed", redactUrl(url_), stats_.exported, stats_.failed);
}

OtlpStats OtlpExporter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void OtlpExporter::run() {
  pthread_setname_np(pthread_self(), "sw-otlp");  // per-thread CPU in top -H, the benches
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, config_.interval, [&] { return stopping_; });
    lock.unlock();
    push();  // each interval, and once more at the stop: the run's last counts
    lock.lock();
  }
}

void OtlpExporter::push() {
  const auto snapshot = board_.latest();
  if (!snapshot) return;  // nothing sampled yet
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  const std::string body = renderOtlp(*snapshot, self_.read(), resource_, now_ns);
  const std::string error = postJson({url_, &body, config_.headers, config_.timeout});
  std::lock_guard lock(mutex_);
  if (error.empty()) {
    if (failing_since_ > 0)
      spdlog::info("otlp {}: exporting again after {} failed", redactUrl(url_), failing_since_);
    failing_since_ = 0;
    ++stats_.exported;
    return;
  }
  ++stats_.failed;
  // Said at the first failure and every tenth after: a receiver down for an hour is 24 lines.
  if (failing_since_++ % 10 == 0)
    spdlog::warn("otlp {}: export failed ({} in a row): {}", redactUrl(url_), failing_since_,
                 error);
}

}  // namespace stallwatch::agent
