// The Prometheus text format, written: label values made safe and escaped, numbers as the
// format spells them, families with their HELP and TYPE. Internal to agent/'s metrics files.
#pragma once

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent/metric_sink.h"
#include "common/text.h"

namespace stallwatch::agent::metrics_text {

// The longest label value written: ids and mount points are bounded where they enter
// (common/text.h); this bounds the page whatever a label was built from.
constexpr size_t kMaxLabelValueBytes = 1024;

// Whether S is ASCII with no backslash, double quote or newline: eight bytes a step (a page's
// label values are thousands of bytes; a byte a step was a ninth of a page's instructions).
inline bool plainAscii(std::string_view s) {
  constexpr uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  // Nonzero where a byte of X equals C (the exact zero-byte test on X ^ C).
  const auto has = [](uint64_t x, unsigned char c) {
    const uint64_t y = x ^ (kOnes * c);
    return (y - kOnes) & ~y & kHighs;
  };
  const auto plain8 = [&](const char* p) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    return ((x & kHighs) | has(x, '\\') | has(x, '"') | has(x, '\n')) == 0;
  };
  const char* p = s.data();
  const size_t n = s.size();
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      const char c = p[i];
      if (static_cast<unsigned char>(c) >= 0x80 || c == '\\' || c == '"' || c == '\n') return false;
    }
    return true;
  }
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (!plain8(p + i)) return false;
  return i == n || plain8(p + n - 8);  // the tail as the last eight bytes, overlapping
}

// Label values: valid UTF-8 (a byte that is not makes Prometheus reject the whole page and
// mark the target down), bounded, and backslash, double quote and newline escaped, as the
// text format requires; appended to OUT.
template <typename Out>
void appendEscaped(std::string_view raw, Out& out) {
  // Most values are short ASCII with nothing to escape (device, collector and job names): one
  // pass to see it, then one append (issue 47: the UTF-8 check and the escape loop were an
  // eighth of a page's instructions).
  if (raw.size() <= kMaxLabelValueBytes && plainAscii(raw)) {
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
  return fmt::format_to(out, FMT_COMPILE("{}"), v);  // no format string parsed at run time
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
  [[gnu::always_inline]] void append(const char* data, size_t n) {
    if (capacity_ - size_ < n) grow(n);
    char* to = bytes_.get() + size_;
    // Most pieces are a few bytes (a quote, a label's name): copied in place, where a call to
    // memcpy for each was a quarter of a page's instructions (issue 47).
    if (n <= 16) {
      copySmall(to, data, n);
    } else {
      std::memcpy(to, data, n);
    }
    size_ += n;
  }
  // For appendEscaped's (begin, end) pairs.
  void append(const char* begin, const char* end) {
    append(begin, static_cast<size_t>(end - begin));
  }
  std::string take() const { return std::string(bytes_.get(), size_); }

 private:
  // N <= 16 bytes as two copies of a fixed size that may overlap (compiled to moves).
  [[gnu::always_inline]] static void copySmall(char* to, const char* from, size_t n) {
    if (n >= 8) {
      std::memcpy(to, from, 8);
      std::memcpy(to + n - 8, from + n - 8, 8);
    } else if (n >= 4) {
      std::memcpy(to, from, 4);
      std::memcpy(to + n - 4, from + n - 4, 4);
    } else if (n > 0) {
      to[0] = from[0];
      to[n / 2] = from[n / 2];
      to[n - 1] = from[n - 1];
    }
  }
  [[gnu::noinline]] void grow(size_t n) {
    capacity_ = std::max(capacity_ * 2, size_ + n);
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity_);
    std::memcpy(bigger.get(), bytes_.get(), size_);
    bytes_ = std::move(bigger);
  }
  std::unique_ptr<char[]> bytes_;
  size_t capacity_, size_ = 0;
};

// What a page writes the same way every time, kept for the pages after: each family's HELP and
// TYPE lines and each histogram's bounds as text. A page has about 90 families, and their nine
// pieces each (four of them measured with strlen) were a sixth of a page's instructions; a
// histogram's bounds formatted for every series, a sixth of the rest (issue 47).
class PageMemo {
 public:
  // Families come in the same order page after page: the one after the last asked is tried
  // before the map. Keyed by the name's address: the families' names, types and helps are
  // string literals (MetricSink::family); the type's and help's addresses are checked too, so a
  // name reused with other words is written again.
  std::string_view header(const char* name, const char* type, const char* help) {
    if (next_ < order_.size()) {
      const Header& h = *order_[next_];
      if (h.name == name && h.type == type && h.help == help) {
        ++next_;
        return h.text;
      }
      order_.resize(next_);  // the families changed here: learn the order from this page
    }
    Header& h = by_name_[name];
    if (h.type != type || h.help != help) {
      h = {name, type, help, {}};
      for (std::string_view part : {"# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n"})
        h.text.append(part);
    }
    order_.push_back(&h);
    ++next_;
    return h.text;
  }
  // A new page: the families are asked again from the first.
  void startPage() { next_ = 0; }
  // BOUNDS' N values as the page writes them. Keyed by the array's address and checked against
  // its values, so an array reused with others is written again.
  const std::vector<std::string>& boundTexts(const double* bounds, size_t n) {
    Bounds& b = bounds_[bounds];
    if (b.values.size() != n || !std::equal(b.values.begin(), b.values.end(), bounds)) {
      b.values.assign(bounds, bounds + n);
      b.texts.clear();
      for (size_t i = 0; i < n; ++i) {
        char text[64];
        b.texts.emplace_back(text, formatNumber(bounds[i], text));  // the bounds are finite
      }
    }
    return b.texts;
  }

 private:
  struct Header {
    const char* name = nullptr;
    const char* type = nullptr;
    const char* help = nullptr;
    std::string text;
  };
  struct Bounds {
    std::vector<double> values;
    std::vector<std::string> texts;
  };
  std::unordered_map<const char*, Header> by_name_;  // nodes: the pointers below stay valid
  std::vector<Header*> order_;                       // as the last page asked for them
  size_t next_ = 0;
  std::unordered_map<const double*, Bounds> bounds_;
};

// The page, appended to one buffer.
class Writer final : public MetricSink {
 public:
  // MEMO, where given, outlives the writer and keeps what it wrote for the next page.
  explicit Writer(PageMemo* memo = nullptr)
      : out_(64 * 1024), memo_(memo ? memo : &own_memo_) {  // a node's page is ~25 KB
    memo_->startPage();
  }
  // Starts a family: HELP and TYPE once, then its samples.
  void family(const char* name, const char* type, const char* help) override {
    name_ = name;
    put(memo_->header(name, type, help));
  }
  using MetricSink::sample;
  void sample(std::span<const Label> labels, double value) override { line({}, labels, value); }
  // The family's _bucket series (cumulative, "+Inf" last), then _sum and _count. The labels are
  // written once for all the buckets.
  void histogram(std::span<const Label> labels, const double* bounds, const uint64_t* per_bound,
                 size_t n_bounds, uint64_t count, double sum) override {
    const std::vector<std::string>& les = memo_->boundTexts(bounds, n_bounds);
    series_.clear();
    series_.append("_bucket{");
    forEachLabel(labels, [&](std::string_view name, std::string_view v) {
      series_.append(name);
      series_.append("=\"");
      appendEscaped(v, series_);
      series_.append("\",");
    });
    series_.append("le=\"");
    const auto bucket = [&](std::string_view le, uint64_t value) {
      put(name_);
      put(series_);
      put(le);
      put("\"} ");
      putNumber(static_cast<double>(value));
      put("\n");
    };
    uint64_t cumulative = 0;
    for (size_t i = 0; i < n_bounds; ++i) {
      cumulative += per_bound[i];
      bucket(les[i], cumulative);
    }
    bucket("+Inf", count);
    line("_sum", labels, sum);
    line("_count", labels, static_cast<double>(count));
  }
  std::string take() { return out_.take(); }

 private:
  // NAME_SUFFIX{LABELS} VALUE
  void line(std::string_view suffix, std::span<const Label> labels, double value) {
    put(name_);
    put(suffix);
    if (!labels.empty()) {
      put("{");
      bool first = true;
      forEachLabel(labels, [&](std::string_view name, std::string_view v) {
        if (!first) put(",");
        put(name);
        put("=\"");
        appendEscaped(v, out_);
        put("\"");
        first = false;
      });
      put("}");
    }
    put(" ");
    putNumber(value);
    put("\n");
  }
  void putNumber(double value) {
    if (std::isnan(value) || std::isinf(value)) {
      put(number(value));
      return;
    }
    // fmt's shortest form, as before, into the stack: the page's text is unchanged. A double's
    // is at most 24 characters (-1.7976931348623157e+308).
    char digits[64];
    const char* end = formatNumber(value, digits);
    put(std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  void put(std::string_view s) { out_.append(s.data(), s.size()); }
  PageBuffer out_;
  PageMemo own_memo_;  // a page's own, where none is kept across pages
  PageMemo* memo_;
  std::string_view name_;  // the family's: a string literal
  std::string series_;     // a histogram series' "_bucket{labels,le=\"", reused
};

}  // namespace stallwatch::agent::metrics_text
