#include "cli/completion.h"

#include <algorithm>
#include <iostream>
#include <vector>

namespace stallwatch::cli {
namespace {

struct OptionSpec {
  std::vector<std::string> names;  // "--db", "-j"
  bool takes_value = false;
  bool file = false;                 // its value is a path: the shell completes file names
  std::vector<std::string> choices;  // its value is one of these
  std::string help;                  // the first sentence of its description
};

struct CommandSpec {
  std::string name, help;
  std::vector<OptionSpec> options;
};

// Whether the option's value is a path, by the last word of its name, as this tool names
// them: --db, --config, --socket, --html FILE, --metrics-file, --root, --proc, --sys,
// --udev-data, --cgroup, --nvml-library, --smartctl-json, --on-incident PROGRAM, -o/--output.
bool valueIsAPath(const std::vector<std::string>& lnames) {
  static const char* kWords[] = {"db",   "config", "file", "socket", "html",    "root", "output",
                                 "proc", "sys",    "data", "cgroup", "library", "json", "incident"};
  for (const auto& n : lnames) {
    const std::string last = n.substr(n.rfind('-') == std::string::npos ? 0 : n.rfind('-') + 1);
    for (const char* w : kWords) {
      if (last == w) return true;
    }
  }
  return false;
}

// The description up to its first sentence's end (". ", "; " or a line's end), at most ~100
// characters: what fits beside a completion.
std::string firstSentence(const std::string& text) {
  size_t end = std::min({text.find(". "), text.find("; "), text.find('\n'), text.size()});
  if (end > 100) end = text.rfind(' ', 100);
  std::string s = text.substr(0, end == std::string::npos ? 100 : end);
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

std::vector<OptionSpec> optionsOf(const CLI::App& app) {
  std::vector<OptionSpec> out;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty() && o->get_snames().empty()) continue;  // positional
    OptionSpec spec;
    for (const auto& l : o->get_lnames()) spec.names.push_back("--" + l);
    for (const auto& s : o->get_snames()) spec.names.push_back("-" + s);
    // A flag expects no value; an option whose value may be left out (--collector.smartctl
    // [=PATH]) completes as a flag.
    spec.takes_value = o->get_items_expected_min() > 0;
    spec.file = spec.takes_value && valueIsAPath(o->get_lnames());
    spec.help = firstSentence(o->get_description());
    if (o->get_lnames() == std::vector<std::string>{"log-level"})
      spec.choices = {"trace", "debug", "info", "warn", "error", "off"};
    out.push_back(std::move(spec));
  }
  return out;
}

std::vector<CommandSpec> commandsOf(const CLI::App& app) {
  std::vector<CommandSpec> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name().empty()) continue;
    out.push_back({sub->get_name(), firstSentence(sub->get_description()), optionsOf(*sub)});
  }
  return out;
}

// The words once each, in their first order.
std::string joined(const std::vector<std::string>& words) {
  std::string s;
  std::vector<std::string> seen;
  for (const auto& w : words) {
    if (std::find(seen.begin(), seen.end(), w) != seen.end()) continue;
    seen.push_back(w);
    s += (s.empty() ? "" : " ") + w;
  }
  return s;
}

// WORDS as a bash case pattern, "a|b|c": each once, sorted.
std::string casePattern(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  std::string pattern;
  for (const auto& w : words) pattern += (pattern.empty() ? "" : "|") + w;
  return pattern;
}

std::vector<std::string> namesOf(const std::vector<OptionSpec>& options) {
  std::vector<std::string> names;
  for (const auto& o : options) names.insert(names.end(), o.names.begin(), o.names.end());
  return names;
}

std::string bash(const std::vector<OptionSpec>& global, const std::vector<CommandSpec>& commands) {
  // Options whose value is a path complete file names; those with other values (but
  // --log-level's choices), nothing.
  std::vector<std::string> files, valued, command_names;
  const auto sort = [&](const std::vector<OptionSpec>& options) {
    for (const auto& o : options) {
      if (!o.takes_value || !o.choices.empty()) continue;
      auto& into = o.file ? files : valued;
      into.insert(into.end(), o.names.begin(), o.names.end());
    }
  };
  sort(global);
  for (const auto& c : commands) {
    sort(c.options);
    command_names.push_back(c.name);
  }
  const std::vector<std::string> global_names = namesOf(global);
  std::string s =
      "# bash completion for stallwatch, written by `stallwatch completion bash` from its parser.\n"
      "_stallwatch() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd='' i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case ${COMP_WORDS[i]} in\n"
      "      " +
      casePattern(command_names) +
      ") cmd=${COMP_WORDS[i]}; break ;;\n"
      "    esac\n"
      "  done\n"
      "  case $prev in\n";
  if (!files.empty())
    s += "    " + casePattern(files) + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  s += "    --log-level) COMPREPLY=($(compgen -W 'trace debug info warn error off' -- \"$cur\")); "
       "return ;;\n";
  if (!valued.empty()) s += "    " + casePattern(valued) + ") COMPREPLY=(); return ;;\n";
  s += "  esac\n  local words\n  case $cmd in\n";
  s += "    '') words='" + joined(command_names) + " " + joined(global_names) + "' ;;\n";
  for (const auto& c : commands) {
    std::vector<std::string> own = namesOf(c.options);
    own.insert(own.end(), global_names.begin(), global_names.end());
    s += "    " + c.name + ") words='" + joined(own) + "' ;;\n";
  }
  s += "  esac\n"
       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
       "}\n"
       "complete -o default -F _stallwatch stallwatch\n";
  return s;
}

// zsh's _arguments spec: brackets, colons and quotes in a description are escaped.
std::string zshQuoted(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    if (c == '\'') {
      out += "'\\''";
      continue;
    }
    out += c;
  }
  return out;
}

std::string zshArgs(const std::vector<OptionSpec>& options) {
  std::string s;
  for (const auto& o : options) {
    const std::string help = zshQuoted(o.help);
    for (const auto& n : o.names) {
      std::string spec = "'";
      spec += n;
      spec += o.takes_value ? "=[" : "[";
      spec += help;
      spec += "]";
      if (o.file)
        spec += ":path:_files";
      else if (!o.choices.empty())
        spec += ":value:(" + joined(o.choices) + ")";
      else if (o.takes_value)
        spec += ":value: ";
      s += "    " + spec + "' \\\n";
    }
  }
  return s;
}

std::string zsh(const std::vector<OptionSpec>& global, const std::vector<CommandSpec>& commands) {
  std::string s =
      "#compdef stallwatch\n"
      "# zsh completion for stallwatch, written by `stallwatch completion zsh` from its parser.\n"
      "_stallwatch() {\n"
      "  local curcontext=$curcontext state line\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const auto& c : commands) s += "    '" + c.name + ":" + zshQuoted(c.help) + "'\n";
  s += "  )\n"
       "  _arguments -C \\\n" +
       zshArgs(global) +
       "    '1: :->command' \\\n"
       "    '*:: :->arguments'\n"
       "  case $state in\n"
       "    command) _describe 'command' commands ;;\n"
       "    arguments)\n"
       "      case $words[1] in\n";
  for (const auto& c : commands) {
    s += "        " + c.name + ")\n          _arguments \\\n" + zshArgs(c.options) +
         zshArgs(global) + "            '*: :_files' ;;\n";
  }
  s += "      esac ;;\n"
       "  esac\n"
       "}\n"
       "_stallwatch \"$@\"\n";
  return s;
}

}  // namespace

std::string completionScript(const CLI::App& app, const std::string& shell) {
  std::vector<OptionSpec> global = optionsOf(app);
  const auto commands = commandsOf(app);
  if (shell == "bash") return bash(global, commands);
  if (shell == "zsh") return zsh(global, commands);
  return "";
}

void addCompletionCommand(CLI::App& app, std::function<int()>& runner) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "completion",
      "Print the shell completion script for bash or zsh (the package installs both)");
  cmd->add_option("shell", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  runner = [&app, shell] {
    std::cout << completionScript(app, *shell);
    return 0;
  };
}

}  // namespace stallwatch::cli
