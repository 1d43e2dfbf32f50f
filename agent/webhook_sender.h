// Posts incident events to an HTTP(S) endpoint (Alertmanager-style receivers, chat webhooks)
// from a thread of its own, through libcurl. A failed post (connection refused, timeout, a
// status other than 2xx) is retried with exponential backoff; after max_attempts the event
// is given up and counted. Nothing here ever waits on the sampling thread's behalf.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "agent/http_post.h"  // redactUrl
#include "common/drop_oldest_queue.h"

namespace stallwatch::agent {

struct WebhookConfig {
  std::string url;
  std::chrono::milliseconds request_timeout = std::chrono::seconds(5);
  int max_attempts = 5;
  std::chrono::milliseconds first_backoff = std::chrono::seconds(1);  // doubled each retry
  size_t queue_capacity = 64;
};

struct WebhookStats {
  uint64_t delivered = 0;
  uint64_t failed_attempts = 0;
  uint64_t given_up = 0;
  uint64_t dropped = 0;  // queue full: oldest dropped
  size_t queued = 0;
};

class WebhookSender {
 public:
  explicit WebhookSender(WebhookConfig config);
  ~WebhookSender();  // tries what is queued for one more request timeout, then gives up
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void submit(std::string json_body);
  WebhookStats stats() const;
  bool waitIdle(std::chrono::milliseconds max);

 private:
  void run();
  // One POST; empty on success, else why it failed.
  std::string post(const std::string& body);

  const WebhookConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  common::DropOldestQueue<std::string> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  WebhookStats stats_;
  std::thread thread_;
};

}  // namespace stallwatch::agent
