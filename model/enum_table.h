// The tables that give each value of an enum its names and units (figure kinds, evidence
// kinds): a row per value, in the enum's order, so that a value's row is found by its number.
// The order is checked when compiled, with the row count beside it.
#pragma once

#include <cstddef>

namespace stallwatch::model {

// Whether ROWS[k].*KIND is the enum's value k for every k.
template <typename Row, std::size_t N, typename Kind>
constexpr bool rowsInEnumOrder(const Row (&rows)[N], Kind Row::*kind) {
  for (std::size_t k = 0; k < N; ++k)
    if (static_cast<std::size_t>(rows[k].*kind) != k) return false;
  return true;
}

}  // namespace stallwatch::model
