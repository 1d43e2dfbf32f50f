// `stallwatch top`'s screen, apart from the terminal: the lines it draws from what was read
// (model::TopData, report/top_data.h), tested without a terminal; top_command.cpp only draws
// the lines and takes the keys.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/report.h"

namespace stallwatch::render {

using model::TopData;

struct TopState {
  size_t selected = 0;    // index into TopData::jobs
  bool evidence = false;  // the selected job's open incident, signal by signal
};

// The screen as lines of at most WIDTH characters, at most HEIGHT of them.
std::vector<std::string> renderTop(const TopData& data, const TopState& state, int width,
                                   int height);

}  // namespace stallwatch::render
