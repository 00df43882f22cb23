#pragma once

// CommandSpec: one `cepbus` command's command line — the options it takes,
// which are also what its --help describes, so that no option goes
// undocumented — and its help text, laid out one way for every command:
//
//   usage: cepbus publish [OPTIONS] ADDRESS
//
//   Publish JSON-lines events to an address of a running bus over AMQP 1.0.
//
//   DESCRIPTION (verbatim)
//
//   Options:
//     --events FILE
//         the events to publish ('-': standard input)
//   Examples:
//     replay the quickstart's ticks into a running bus:
//       cepbus publish stocks.ticks --events examples/quickstart/stocks.jsonl
//   Environment:
//   Files:
//   Exit status:
//
// cmake/HelpToMan.cmake makes the man pages from this text: the section
// headings at the start of a line become the man page's OPTIONS, EXAMPLES,
// ENVIRONMENT, FILES and EXIT STATUS, so they are a contract.
//
// parse() reads `--flag value`, `--flag=value` and switches (FlagReader);
// an argument that does not start with '-' (or is "-") is positional. A
// flag the spec does not list is refused as "unknown argument '--x'", the
// wording of every command.
//
// Thread-safety: plain data; share it as const.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::app {

// An option (`value` empty: a switch), a variable, a file or an example.
struct HelpEntry {
  std::string term;   // "--rate", "CEPBUS_PASSWORD", a command line
  std::string value;  // options: what follows the flag, "N[/s]"; empty for the others
  std::string text;   // what it means; wrapped to 80 columns
};

// The options, and the positional arguments in order, as given.
struct ParsedArguments {
  std::vector<std::pair<std::string, std::string>> options;  // flag -> value ("" for a switch)
  std::vector<std::string> positional;

  bool has(std::string_view flag) const;
  // The last value given for `flag`; `fallback` when none.
  std::string value(std::string_view flag, std::string fallback = {}) const;
  // Every value given for `flag`, in order.
  std::vector<std::string> values(std::string_view flag) const;
};

struct CommandSpec {
  std::string name;         // "publish", "cluster"
  std::string usage;        // after "usage: "; continuation lines start with spaces
  std::string summary;      // one line, as `cepbus --help` lists it (and man's NAME)
  std::string description;  // verbatim, may be empty
  std::vector<HelpEntry> options;
  std::vector<HelpEntry> examples;  // term: the command line; text: what it does
  std::vector<HelpEntry> environment;
  std::vector<HelpEntry> files;
  std::string exit_status = "0 success, 1 failure, 2 bad command line.";

  // InvalidArgument "unknown argument '--x'" or "--x needs a value".
  Result<ParsedArguments> parse(std::span<const std::string> args) const;
  std::string help() const;
};

// `text` wrapped at 80 columns, each line indented by `indent` spaces;
// paragraphs (blank lines) and lines that start with spaces are kept.
std::string wrapText(std::string_view text, size_t indent);

}  // namespace cepbus::app
