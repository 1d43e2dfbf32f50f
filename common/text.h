#pragma once
// Text from outside (process environments, command lines, comm, mount points, datagrams) made
// safe once where it enters: valid UTF-8 and bounded, before it reaches the DB, JSON, /metrics
// or a terminal; and, for a terminal, control characters made visible.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stallwatch::common {

// The longest text kept from outside by default: a job's id, a label value, a mount point.
inline constexpr size_t kMaxOutsideTextBytes = 256;

// TEXT as valid UTF-8 of at most MAX_BYTES bytes: each byte that does not start a valid
// sequence (overlong forms, surrogates and code points past U+10FFFF included) becomes U+FFFD;
// a longer text is cut on a character boundary and ends in "...". Texts changed are counted.
std::string boundedUtf8(std::string_view text, size_t max_bytes = kMaxOutsideTextBytes);

// TEXT for a terminal or a one-line table cell: C0 controls, DEL and C1 controls written as
// \n, \t, \r or \xNN (a backslash doubled), so that nothing from outside moves the cursor or
// splits a row. Invalid UTF-8 is replaced as by boundedUtf8, without a bound.
std::string printable(std::string_view text);

// A whole text output for a terminal: as printable, but its own newlines and tabs kept and
// backslashes left alone; fields from outside that could hold a newline go through printable
// first, so that they cannot split a row.
std::string printableLines(std::string_view text);

// URL with any user:password before its host written as ***@, for logs and errors: a password
// given in a URL is never said back (the webhook's own redaction hides its path too).
std::string withoutUserinfo(std::string_view url);

// Whether TEXT is valid UTF-8.
bool isUtf8(std::string_view text);

// How many texts boundedUtf8 changed in this process (invalid bytes replaced or cut short).
uint64_t outsideTextsChanged();

}  // namespace stallwatch::common
