#include "cli/usage.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>

namespace stallwatch::cli {

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  // "--correlate,--no-correlate{false}": the negated flag's default is the parser's business.
  static const std::regex braces(R"(\{[^}]*\})");
  std::string name =
      std::regex_replace(CLI::Formatter::make_option_name(opt, is_positional), braces, "");
  std::replace(name.begin(), name.end(), ',', ' ');
  return name;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
  const std::string type = opt->get_type_name();
  if (opt->get_type_size() == 0 || type.empty()) return "";  // a flag
  const char* metavar = type.find("FILE") != std::string::npos                    ? "FILE"
                        : type.find("DIR") != std::string::npos                   ? "DIR"
                        : type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 ? "N"
                        : type.rfind("FLOAT", 0) == 0                             ? "NUMBER"
                                                                                  : "VALUE";
  std::string out = std::string(" ") + metavar;
  if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
  return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  std::string out = opt->get_description();
  if (opt->get_required()) out += " (required)";
  if (opt->get_type_size() != 0 && !opt->get_type_name().empty() && !opt->get_default_str().empty())
    out += " (default: " + opt->get_default_str() + ")";
  if (!opt->get_envname().empty()) out += " (environment: " + opt->get_envname() + ")";
  return out;
}

void addExamples(CLI::App& app) {
  static const std::map<std::string, const char*> examples = {
      {"record",
       "  stallwatch record                      follow every training job, the default DB\n"
       "  stallwatch record --listen :9877       and serve /metrics on every interface\n"
       "  stallwatch record --pid 4242 --db run.db --duration 2h"},
      {"devices", "  stallwatch devices                     the block devices, mounts and GPUs"},
      {"jobs", "  stallwatch jobs --db run.db            the jobs a recording holds"},
      {"incidents",
       "  stallwatch incidents --db run.db       the stalls, as the post-mortem finds them\n"
       "  stallwatch incidents --live            what the agent paged"},
      {"report",
       "  stallwatch report --db run.db          goodput, limiter, incidents, devices\n"
       "  stallwatch report --since 2h --html -  the last two hours as a page on stdout\n"
       "  stallwatch report --db 'nodes/*.db'    a run across nodes"},
      {"replay",
       "  stallwatch replay --db run.db --on-incident ./page.sh   try a hook on a real stall"},
      {"export", "  stallwatch export --db run.db --job 3 -o job3.db"},
      {"health", "  stallwatch health                      every drive's SMART verdict"},
      {"top",
       "  stallwatch top                         the live view (q quits)\n"
       "  stallwatch top --once --job 3          one frame of job 3, for a script"},
      {"run", "  stallwatch run -- python train.py      the job's steps with no code change"},
      {"completion",
       "  source <(stallwatch completion bash)   completion in this shell\n"
       "  stallwatch completion zsh > \"${fpath[1]}/_stallwatch\""},
  };
  for (CLI::App* sub : app.get_subcommands({})) {
    if (auto it = examples.find(sub->get_name()); it != examples.end())
      sub->footer(std::string("\nExamples:\n") + it->second);
  }
}

namespace {

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closestName(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;  // a typo, not another word
  for (const auto& c : candidates) {
    const size_t d = editDistance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string usageError(const CLI::App& app, const CLI::ParseError& error,
                       const std::vector<std::string>& args) {
  std::string out = std::string("stallwatch: ") + error.what();
  std::vector<std::string> commands;
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  for (const auto& a : args) {
    if (a == "--") break;
    if (!command) {
      for (const CLI::App* sub : app.get_subcommands({}))
        if (sub->get_name() == a) command = sub;
    }
  }
  std::vector<std::string> options;
  for (const CLI::App* owner : {&app, command}) {
    if (!owner) continue;
    for (const CLI::Option* opt : owner->get_options({})) {
      for (const auto& name : opt->get_lnames()) options.push_back("--" + name);
    }
  }
  for (const auto& a : args) {
    if (a == "--") break;
    if (a.rfind("--", 0) == 0) {
      const std::string name = a.substr(0, a.find('='));
      if (std::find(options.begin(), options.end(), name) != options.end()) continue;
      if (const std::string near = closestName(name, options); !near.empty()) {
        out += fmt::format("\n  {}: did you mean {}?", name, near);
      }
    } else if (!command && a.rfind('-', 0) != 0) {
      if (const std::string near = closestName(a, commands); !near.empty()) {
        out += fmt::format("\n  '{}' is not a command: did you mean '{}'?", a, near);
      } else {
        out += fmt::format("\n  '{}' is not a command; the commands: {}", a,
                           fmt::join(commands, ", "));
      }
      break;
    }
  }
  const std::string help =
      command ? "stallwatch " + command->get_name() + " --help" : "stallwatch --help";
  return out + "\n  (" + help + " says how it is used)";
}

}  // namespace stallwatch::cli
