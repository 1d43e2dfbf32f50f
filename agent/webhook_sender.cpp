#include "agent/webhook_sender.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "agent/http_post.h"

namespace stallwatch::agent {

WebhookSender::WebhookSender(WebhookConfig config)
    : config_(std::move(config)), queue_(config_.queue_capacity) {
  thread_ = std::thread([this] { run(); });
}

WebhookSender::~WebhookSender() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void WebhookSender::submit(std::string body) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.push(std::move(body)) > 0) {
      ++stats_.dropped;
      spdlog::warn("webhook: {} events waiting; dropped the oldest", config_.queue_capacity);
    }
  }
  wake_.notify_all();
}

WebhookStats WebhookSender::stats() const {
  std::lock_guard lock(mutex_);
  WebhookStats s = stats_;
  s.queued = queue_.size();
  return s;
}

bool WebhookSender::waitIdle(std::chrono::milliseconds max) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, max, [&] { return queue_.empty() && !busy_; });
}

std::string WebhookSender::post(const std::string& body) {
  return postJson({config_.url, &body, {}, config_.request_timeout});
}

void WebhookSender::run() {
  pthread_setname_np(pthread_self(), "sw-webhook");  // per-thread CPU in top -H, the benches
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, nothing left
    std::string body = *queue_.pop();
    busy_ = true;
    auto backoff = config_.first_backoff;
    bool delivered = false;
    for (int attempt = 1; attempt <= config_.max_attempts; ++attempt) {
      lock.unlock();
      const std::string error = post(body);
      lock.lock();
      if (error.empty()) {
        delivered = true;
        break;
      }
      ++stats_.failed_attempts;
      spdlog::warn("webhook {}: attempt {} of {} failed: {}", redactUrl(config_.url), attempt,
                   config_.max_attempts, error);
      if (stopping_ || attempt == config_.max_attempts) break;
      // Interruptible: a stop does not wait out the backoff.
      wake_.wait_for(lock, backoff, [&] { return stopping_; });
      backoff *= 2;
    }
    if (delivered) {
      ++stats_.delivered;
    } else {
      ++stats_.given_up;
      // Stopping with the receiver down: the rest would fail the same way, one timeout each.
      if (stopping_) {
        stats_.given_up += queue_.clear();
      }
    }
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  idle_.notify_all();
}

}  // namespace stallwatch::agent
