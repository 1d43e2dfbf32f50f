#include "collectors/jobs/statsd.h"

#include <cmath>

#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

bool validNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

StatsdParse parseStatsd(std::string_view datagram) {
  StatsdParse result;
  forEachLine(datagram, [&](std::string_view line, size_t line_number) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return;
    auto skip = [&](std::string why) { result.skipped.push_back({line_number, std::move(why)}); };
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      skip("expected <name>:<value>|<type>");
      return;
    }
    const std::string_view name = line.substr(0, colon);
    if (name.size() > kMaxStatsdNameBytes) {
      skip("metric name longer than " + std::to_string(kMaxStatsdNameBytes) + " bytes");
      return;
    }
    for (char c : name) {
      if (!validNameChar(c)) {
        skip("metric name has a character outside [A-Za-z0-9._-]");
        return;
      }
    }
    std::string_view rest = line.substr(colon + 1);
    const size_t bar = rest.find('|');
    if (bar == std::string_view::npos) {
      skip("no '|<type>' after the value");
      return;
    }
    const auto value = parseDouble(rest.substr(0, bar));
    if (!value || !std::isfinite(*value)) {
      skip("value '" + std::string(rest.substr(0, bar)) + "' is not a finite number");
      return;
    }
    rest.remove_prefix(bar + 1);
    const size_t type_end = rest.find('|');
    const std::string_view type = rest.substr(0, type_end);
    StatsdMetric m;
    m.name = std::string(name);
    m.value = *value;
    if (type == "c") {
      m.type = StatsdType::kCounter;
    } else if (type == "ms") {
      m.type = StatsdType::kTimer;
    } else if (type == "g") {
      m.type = StatsdType::kGauge;
    } else {
      skip("type '" + std::string(type) + "' is not c, ms or g");
      return;
    }
    rest = type_end == std::string_view::npos ? std::string_view{} : rest.substr(type_end + 1);
    while (!rest.empty()) {
      const size_t end = rest.find('|');
      const std::string_view section = rest.substr(0, end);
      if (!section.empty() && section[0] == '@') {
        const auto rate = parseDouble(section.substr(1));
        if (!rate || !(*rate > 0.0) || *rate > 1.0) {
          skip("sample rate '" + std::string(section) + "' is not in (0, 1]");
          return;
        }
        m.sample_rate = *rate;
      } else if (!section.empty() && section[0] == '#') {
        std::string_view tags = section.substr(1);
        while (!tags.empty()) {
          const size_t comma = tags.find(',');
          if (m.tags.size() == kMaxStatsdTags) {
            skip("more than " + std::to_string(kMaxStatsdTags) + " tags");
            return;
          }
          m.tags.emplace_back(tags.substr(0, comma));
          if (comma == std::string_view::npos) break;
          tags.remove_prefix(comma + 1);
        }
      } else {
        skip("unknown section '" + std::string(section) + "'");
        return;
      }
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
    result.metrics.push_back(std::move(m));
  });
  return result;
}

}  // namespace stallwatch::collectors
