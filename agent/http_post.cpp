#include "agent/http_post.h"

#include <curl/curl.h>

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

std::string postJson(const JsonPost& post) {
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)curl_ready;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return "curl_easy_init failed";
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const auto& h : post.headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, curl_slist_free_all);
  CURL* c = curl.get();
  const std::string& body = *post.body;
  curl_easy_setopt(c, CURLOPT_URL, post.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(post.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(post.timeout.count()));
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

}  // namespace stallwatch::agent
