#include "agent/webhook_sender.h"

#include <curl/curl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace stallwatch::agent {

std::string redactUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "(a URL)";
  const size_t host_start = scheme_end + 3;
  const size_t path_start = url.find_first_of("/?#", host_start);
  std::string authority = url.substr(
      host_start, path_start == std::string::npos ? std::string::npos : path_start - host_start);
  if (const size_t at = authority.rfind('@'); at != std::string::npos)
    authority = "***@" + authority.substr(at + 1);
  const bool more = path_start != std::string::npos && path_start + 1 < url.size();
  return url.substr(0, host_start) + authority + (more ? "/..." : "");
}
namespace {

size_t discardBody(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

WebhookSender::WebhookSender(WebhookConfig config)
    : config_(std::move(config)), queue_(config_.queue_capacity) {
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)curl_ready;
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
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return "curl_easy_init failed";
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
      curl_slist_append(nullptr, "Content-Type: application/json"), curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, config_.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.request_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_USERAGENT, "stallwatch/" STALLWATCH_VERSION);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discardBody);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) return curl_easy_strerror(rc);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) return "HTTP status " + std::to_string(status);
  return "";
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
