#pragma once
// The command line as people and scripts expect it of a Unix tool (issue 44): --help without
// the parser's type noise, defaults said in words, an example per command; exit status 2 for
// every usage error, with "did you mean" for a mistyped command or option.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace stallwatch::cli {

// --help as people read it: "--interval VALUE  ... (default: 1s)" rather than
// "--interval TEXT=1s", "--correlate, --no-correlate" rather than "--no-correlate{false}".
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
};

// Each command's examples, shown at the end of its --help.
void addExamples(CLI::App& app);

// The closest of CANDIDATES to WORD, if close enough to be a typo ("" where none is).
std::string closestName(const std::string& word, const std::vector<std::string>& candidates);

// What to say about a parse error of ARGS (the program's arguments after its name): the
// parser's message and, where a word is a near miss of a command or an option, the one meant.
std::string usageError(const CLI::App& app, const CLI::ParseError& error,
                       const std::vector<std::string>& args);

}  // namespace stallwatch::cli
