// Small helpers for storage's statements: result columns read by name (resolved once per
// statement, not per row), and the binds every reader repeats. Storage-internal.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stallwatch::storage {

// A reading a recording holds, or none where it is no reading: NaN, infinite, or past any a
// collector gives (1e15: a PB/s, a thousand trillion steps). A recording is a file anyone may
// have edited: 1e308 waited seconds summed to infinity, then "waited for input -nan %" (issue 46).
inline std::optional<double> reading(double v) {
  constexpr double kMaxReading = 1e15;
  if (!std::isfinite(v) || std::fabs(v) > kMaxReading) return std::nullopt;
  return v;
}

// The current row of Q by column name. Q must have been prepared; names are its result
// columns (an expression needs an AS name).
class Columns {
 public:
  explicit Columns(SQLite::Statement& q) : q_(q) {}
  int index(const char* name) const { return q_.getColumnIndex(name); }
  SQLite::Column at(const char* name) const { return q_.getColumn(index(name)); }
  bool isNull(const char* name) const { return at(name).isNull(); }
  int64_t int64(const char* name) const { return at(name).getInt64(); }
  double real(const char* name) const { return at(name).getDouble(); }
  std::string text(const char* name) const {
    const SQLite::Column c = at(name);
    return c.isNull() ? std::string() : c.getString();
  }
  std::optional<double> optionalReal(const char* name) const {
    const SQLite::Column c = at(name);
    return c.isNull() ? std::nullopt : reading(c.getDouble());
  }
  std::optional<int64_t> optionalInt64(const char* name) const {
    const SQLite::Column c = at(name);
    return c.isNull() ? std::nullopt : std::optional<int64_t>(c.getInt64());
  }

 private:
  SQLite::Statement& q_;
};

// A statement whose named parameters are looked up once each. SQLite finds a name by comparing
// it with each of the statement's in turn: for the per-interval inserts (16 parameters) that
// search was an eighth of the writer's instructions (issue 47). Here a name is found by its
// pointer (the callers' string literals), confirmed by one comparison.
class NamedStatement : public SQLite::Statement {
 public:
  using SQLite::Statement::Statement;
  template <typename... V>
  void bind(int index, V&&... value) {
    SQLite::Statement::bind(index, std::forward<V>(value)...);
  }
  template <typename... V>
  void bind(const char* name, V&&... value) {
    SQLite::Statement::bind(indexOf(name), std::forward<V>(value)...);
  }

 private:
  // A row binds its names in the same order as the row before: the one after the last found is
  // tried first (a search of the list for each was 5 % of the writer's instructions, issue 47).
  int indexOf(const char* name) {
    if (next_ < known_.size() && known_[next_].first == name) return known_[next_++].second;
    for (size_t i = 0; i < known_.size(); ++i) {
      if (known_[i].first == name && std::strcmp(known_[i].first, name) == 0) {
        next_ = i + 1;
        return known_[i].second;
      }
    }
    const int index = getIndex(name);  // as SQLite numbers it; 0 for a name it lacks
    if (index == 0) throw SQLite::Exception(std::string("no parameter ") + name);
    known_.emplace_back(name, index);
    next_ = known_.size();
    return index;
  }
  std::vector<std::pair<const char*, int>> known_;
  size_t next_ = 0;
};

inline std::optional<double> optionalReal(const SQLite::Column& c) {
  return c.isNull() ? std::nullopt : reading(c.getDouble());
}

// The parameter KEY (a name, ":x", or a 1-based position) bound to VALUE, or NULL without
// one (the "WHERE :x IS NULL OR col = :x" filters, optional readings).
template <typename Statement, typename Key, typename T>
void bindOptional(Statement& st, Key key, const std::optional<T>& value) {
  if (!value) {
    st.bind(key);
  } else if constexpr (std::is_floating_point_v<T>) {
    st.bind(key, static_cast<double>(*value));
  } else {
    st.bind(key, static_cast<int64_t>(*value));
  }
}

// TEXT, or NULL for an empty one.
template <typename Statement, typename Key>
void bindTextOrNull(Statement& st, Key key, const std::string& text) {
  if (text.empty()) {
    st.bind(key);
  } else {
    st.bind(key, text);
  }
}

// A list as the DB keeps it (GPU UUIDs, device names): comma-separated.
inline std::string joinList(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

// A comma-separated list as the DB keeps it (GPU UUIDs, ranks); "" is no entries.
inline std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find(',', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// "INSERT INTO TABLE (a, b) VALUES (:a, :b)": one list of columns, bound by name.
inline std::string insertSql(const std::string& table, const std::string& columns) {
  std::string values;
  for (const auto& column : splitList(columns)) {
    values += (values.empty() ? ":" : ", :") + column.substr(column.find_first_not_of(' '));
  }
  return "INSERT INTO " + table + " (" + columns + ") VALUES (" + values + ")";
}

// "a=:a, b=:b" for COLUMNS "a, b": an UPDATE's SET, bound by name.
inline std::string assignmentsSql(const std::string& columns) {
  std::string out;
  for (const auto& c : splitList(columns)) {
    const std::string column = c.substr(c.find_first_not_of(' '));
    if (!out.empty()) out += ", ";
    out.append(column).append("=:").append(column);
  }
  return out;
}

}  // namespace stallwatch::storage
