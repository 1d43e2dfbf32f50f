#include "common/text.h"

#include <algorithm>
#include <atomic>

namespace stallwatch::common {
namespace {

std::atomic<uint64_t> g_changed{0};

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kCut = "...";

// The length of the valid UTF-8 sequence at TEXT[i], or 0 where none starts there
// (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
size_t sequenceAt(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

std::string escapeControls(std::string_view text, bool lines);

// TEXT with invalid bytes replaced; CHANGED set where one was.
std::string validUtf8(std::string_view text, bool& changed) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequenceAt(text, i);
    if (n == 0) {
      out += kReplacement;
      changed = true;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace

bool isUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequenceAt(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string boundedUtf8(std::string_view text, size_t max_bytes) {
  bool changed = false;
  std::string out = isUtf8(text) ? std::string(text) : validUtf8(text, changed);
  if (out.size() > max_bytes) {
    changed = true;
    size_t keep = max_bytes > kCut.size() ? max_bytes - kCut.size() : 0;
    // Back to a character boundary: not inside a multi-byte sequence.
    while (keep > 0 && (static_cast<unsigned char>(out[keep]) & 0xC0) == 0x80) --keep;
    out.resize(keep);
    if (max_bytes >= kCut.size()) out += kCut;
  }
  if (changed) g_changed.fetch_add(1, std::memory_order_relaxed);
  return out;
}

std::string printable(std::string_view text) { return escapeControls(text, false); }

std::string printableLines(std::string_view text) { return escapeControls(text, true); }

std::string withoutUserinfo(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const size_t host_start = scheme_end + 3;
  const size_t path_start = std::min(url.find_first_of("/?#", host_start), url.size());
  const size_t at = url.substr(host_start, path_start - host_start).rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, host_start)) + "***@" +
         std::string(url.substr(host_start + at + 1));
}

namespace {

std::string escapeControls(std::string_view text, bool lines) {
  bool changed = false;
  const std::string valid = isUtf8(text) ? std::string(text) : validUtf8(text, changed);
  std::string out;
  out.reserve(valid.size());
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < valid.size(); ++i) {
    const auto c = static_cast<unsigned char>(valid[i]);
    // C1 controls are U+0080..U+009F: in UTF-8, 0xC2 followed by 0x80..0x9F.
    const bool c1 = c == 0xC2 && i + 1 < valid.size() &&
                    static_cast<unsigned char>(valid[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(valid[i + 1]) <= 0x9F;
    // A whole output keeps its own line breaks, tabs and backslashes.
    const bool kept = lines && (c == '\n' || c == '\t' || c == '\\');
    const bool escaped = !kept && (c == '\\' || c < 0x20 || c == 0x7F || c1);
    if (!escaped) {
      out += static_cast<char>(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {  // another control character, C0, DEL or C1
      const unsigned char v = c1 ? static_cast<unsigned char>(valid[++i]) : c;
      out += "\\x";
      out += kHex[v >> 4];
      out += kHex[v & 0xF];
    }
  }
  return out;
}

}  // namespace

uint64_t outsideTextsChanged() { return g_changed.load(std::memory_order_relaxed); }

}  // namespace stallwatch::common
