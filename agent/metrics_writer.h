// The Prometheus text format, written: label values made safe and escaped, numbers as the
// format spells them, families with their HELP and TYPE. Internal to agent/'s metrics files.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "agent/metric_sink.h"
#include "common/text.h"

namespace stallwatch::agent::metrics_text {

// The longest label value written: ids and mount points are bounded where they enter
// (common/text.h); this bounds the page whatever a label was built from.
constexpr size_t kMaxLabelValueBytes = 1024;

// Label values: valid UTF-8 (a byte that is not makes Prometheus reject the whole page and
// mark the target down), bounded, and backslash, double quote and newline escaped, as the
// text format requires; appended to OUT.
template <typename Out>
void appendEscaped(std::string_view raw, Out& out) {
  // Most values are short ASCII with nothing to escape (device, collector and job names): one
  // pass to see it, then one append (issue 47: the UTF-8 check and the escape loop were an
  // eighth of a page's instructions).
  if (raw.size() <= kMaxLabelValueBytes && std::all_of(raw.begin(), raw.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x80 && c != '\\' && c != '"' && c != '\n';
      })) {
    out.append(raw.data(), raw.data() + raw.size());
    return;
  }
  const bool safe = raw.size() <= kMaxLabelValueBytes && common::isUtf8(raw);
  const std::string bounded = safe ? std::string() : common::boundedUtf8(raw, kMaxLabelValueBytes);
  const std::string_view value = safe ? raw : bounded;
  size_t plain = 0;  // the run of bytes since the last one escaped, appended at once
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    const char* escaped = c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : nullptr;
    if (!escaped) continue;
    out.append(value.data() + plain, value.data() + i);
    out.append(escaped, escaped + 2);
    plain = i + 1;
  }
  out.append(value.data() + plain, value.data() + value.size());
}

// V as fmt's shortest form writes it, into OUT (at least 32 bytes); its end. A whole number
// below 10^15 is written as digits directly, as fmt writes it (most samples are counts and
// bytes: fmt's float path was a fifth of a page's instructions, issue 47).
inline char* formatNumber(double v, char* out) {
  // The range first: a cast of a double past int64's is undefined.
  if (std::fabs(v) < 1e15 && v == static_cast<double>(static_cast<int64_t>(v)) &&
      !(v == 0 && std::signbit(v))) {
    int64_t n = static_cast<int64_t>(v);
    if (n < 0) *out++ = '-';
    uint64_t u = n < 0 ? static_cast<uint64_t>(-n) : static_cast<uint64_t>(n);
    char digits[20];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u);
    while (k) *out++ = digits[--k];
    return out;
  }
  return fmt::format_to(out, "{}", v);
}

inline std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char digits[64];
  return std::string(digits, formatNumber(v, digits));
}

// The page's bytes: a buffer grown by doubling (not zero-filled), each piece appended with one
// length check and a memcpy. fmt's memory_buffer spent as much again in its generic append
// around each copy (issue 47: 45 % of a page's 311 000 instructions were appends, 4 000 a
// page).
class PageBuffer {
 public:
  explicit PageBuffer(size_t reserve)
      : bytes_(std::make_unique_for_overwrite<char[]>(reserve)), capacity_(reserve) {}
  void append(const char* data, size_t n) {
    if (capacity_ - size_ < n) grow(n);
    std::memcpy(bytes_.get() + size_, data, n);
    size_ += n;
  }
  // For appendEscaped's (begin, end) pairs.
  void append(const char* begin, const char* end) {
    append(begin, static_cast<size_t>(end - begin));
  }
  std::string take() const { return std::string(bytes_.get(), size_); }

 private:
  [[gnu::noinline]] void grow(size_t n) {
    capacity_ = std::max(capacity_ * 2, size_ + n);
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity_);
    std::memcpy(bigger.get(), bytes_.get(), size_);
    bytes_ = std::move(bigger);
  }
  std::unique_ptr<char[]> bytes_;
  size_t capacity_, size_ = 0;
};

// The page, appended to one buffer.
class Writer final : public MetricSink {
 public:
  Writer() : out_(64 * 1024) {}  // a node's page is about 20 KB: no regrowth
  // Starts a family: HELP and TYPE once, then its samples.
  void family(const char* name, const char* type, const char* help) override {
    name_ = name;
    for (std::string_view part : {"# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n"})
      put(part);
  }
  using MetricSink::sample;
  void sample(std::span<const Label> labels, double value) override {
    line("", labels, nullptr, value);
  }
  // The family's _bucket series (cumulative, "+Inf" last), then _sum and _count.
  void histogram(std::span<const Label> labels, const double* bounds, const uint64_t* per_bound,
                 size_t n_bounds, uint64_t count, double sum) override {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < n_bounds; ++i) {
      cumulative += per_bound[i];
      char le[64];
      *formatNumber(bounds[i], le) = '\0';  // the bounds are finite
      line("_bucket", labels, le, static_cast<double>(cumulative));
    }
    line("_bucket", labels, "+Inf", static_cast<double>(count));
    line("_sum", labels, nullptr, sum);
    line("_count", labels, nullptr, static_cast<double>(count));
  }
  std::string take() { return out_.take(); }

 private:
  // NAME_SUFFIX{LABELS[,le="LE"]} VALUE
  void line(const char* suffix, std::span<const Label> labels, const char* le, double value) {
    put(name_);
    put(suffix);
    if (!labels.empty() || le) {
      put("{");
      bool first = true;
      const auto label = [&](std::string_view name, std::string_view v) {
        if (!first) put(",");
        put(name);
        put("=\"");
        appendEscaped(v, out_);
        put("\"");
        first = false;
      };
      forEachLabel(labels, label);
      if (le) label("le", le);
      put("}");
    }
    put(" ");
    if (std::isnan(value) || std::isinf(value)) {
      put(number(value));
    } else {
      // fmt's shortest form, as before, into the stack: the page's text is unchanged. A
      // double's is at most 24 characters (-1.7976931348623157e+308).
      char digits[64];
      const char* end = formatNumber(value, digits);
      put(std::string_view(digits, static_cast<size_t>(end - digits)));
    }
    put("\n");
  }
  void put(std::string_view s) { out_.append(s.data(), s.size()); }
  PageBuffer out_;
  std::string name_;
};

}  // namespace stallwatch::agent::metrics_text
