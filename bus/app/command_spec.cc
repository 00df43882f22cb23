#include "bus/app/command_spec.h"

#include <sstream>

#include "bus/app/flag_reader.h"

namespace cepbus::app {
namespace {

constexpr size_t kWidth = 80;

void section(std::ostream& out, const char* heading, const std::vector<HelpEntry>& entries,
             size_t text_indent) {
  if (entries.empty()) return;
  out << "\n" << heading << "\n";
  for (const HelpEntry& e : entries) {
    out << "  " << e.term << (e.value.empty() ? "" : " " + e.value) << "\n"
        << wrapText(e.text, text_indent);
  }
}

}  // namespace

bool ParsedArguments::has(std::string_view flag) const {
  for (const auto& [f, v] : options) {
    if (f == flag) return true;
  }
  return false;
}

std::string ParsedArguments::value(std::string_view flag, std::string fallback) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it) {
    if (it->first == flag) return it->second;
  }
  return fallback;
}

std::vector<std::string> ParsedArguments::values(std::string_view flag) const {
  std::vector<std::string> out;
  for (const auto& [f, v] : options) {
    if (f == flag) out.push_back(v);
  }
  return out;
}

Result<ParsedArguments> CommandSpec::parse(std::span<const std::string> args) const {
  ParsedArguments parsed;
  FlagReader flags(args);
  while (flags.next()) {
    const std::string& arg = flags.argument();
    if (arg == "-" || !arg.starts_with("-")) {
      parsed.positional.push_back(arg);
      continue;
    }
    const HelpEntry* option = nullptr;
    for (const HelpEntry& o : options) {
      if (o.term == flags.flag()) option = &o;
    }
    // A switch written with "=value" is no switch of ours either.
    if (option == nullptr || (option->value.empty() && flags.hasInlineValue())) {
      return Status::invalidArgument("unknown argument '" + arg + "'");
    }
    if (option->value.empty()) {
      parsed.options.emplace_back(option->term, "");
      continue;
    }
    Result<std::string> value = flags.value();
    if (!value) return value.status();
    parsed.options.emplace_back(option->term, std::move(*value));
  }
  return parsed;
}

std::string CommandSpec::help() const {
  std::ostringstream out;
  out << "usage: " << usage << "\n\n" << wrapText(summary, 0);
  if (!description.empty()) out << "\n" << description;
  section(out, "Options:", options, 6);
  if (!examples.empty()) {
    out << "\nExamples:\n";
    for (const HelpEntry& e : examples)
      out << wrapText(e.text + ":", 2) << "    " << e.term << "\n";
  }
  section(out, "Environment:", environment, 6);
  section(out, "Files:", files, 6);
  out << "\nExit status:\n" << wrapText(exit_status, 2);
  return out.str();
}

std::string wrapText(std::string_view text, size_t indent) {
  std::string out;
  std::istringstream lines{std::string(text)};
  std::string paragraph_line;
  std::string line;
  auto flush = [&] {
    if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  while (std::getline(lines, paragraph_line)) {
    if (paragraph_line.empty() || paragraph_line.starts_with(" ")) {
      // A blank line ends a paragraph; an indented one (a command, a
      // table) is kept as written.
      flush();
      out += paragraph_line.empty() ? "\n" : std::string(indent, ' ') + paragraph_line + "\n";
      continue;
    }
    std::istringstream words(paragraph_line);
    for (std::string word; words >> word;) {
      if (!line.empty() && indent + line.size() + 1 + word.size() > kWidth) flush();
      line += (line.empty() ? "" : " ") + word;
    }
  }
  flush();
  return out;
}

}  // namespace cepbus::app
