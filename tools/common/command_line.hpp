// What the tools' command lines share (ccl-bench, ccl-sim, ccl-topo and the
// peer benches): CLI11 set up alike, one line and exit status 2 for a usage
// error, sizes read as the library reads them, and numbers read in decimal.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace nnpccl_tools {

// The last of a repeated flag wins, as in nccl-tests: scripts append
// overrides. `column_width` lines the help's descriptions up.
void house_style(CLI::App &app, int column_width);

enum class Parsed { Run, Help, Error };

// Parses the command line; *error holds CLI11's message on Error.
Parsed parse_command_line(CLI::App &app, int argc, char **argv, std::string *error);

// A usage error: "TOOL: WHY" and, if `hint` is not empty, " (see HINT)", in
// one line on stderr, then exit status 2, so that a script tells a usage
// error from a failed run (1).
[[noreturn]] void exit_usage(const std::string &tool, const std::string &why, const std::string &hint);

// How a tool with no ranks to tear down reports its usage errors.
class Usage {
public:
    Usage(std::string tool, std::string hint) : tool_(std::move(tool)), hint_(std::move(hint)) {}
    [[noreturn]] void error(const std::string &why) const { exit_usage(tool_, why, hint_); }
    // Parses argv: --help prints the help on stdout and exits 0; a parse
    // error is error().
    void parse(CLI::App &app, int argc, char **argv) const;

private:
    std::string tool_, hint_;
};

// A size such as "64M" (common/parse_size.hpp); false for anything else.
bool read_size(const char *text, size_t *out);
// A whole number in decimal in [min, max]; false for anything else.
bool read_decimal(const char *text, long min, long max, long *out);

// Validators that hand the option its value canonical: CLI11 alone reads
// integers in any base ("010" is 8, "0x10" 16), and no size suffix.
// Sizes: bytes, "X is not a size (bytes, or with a K, M or G suffix)".
CLI::Validator size_value();
// Whole numbers in [min, 2^30]: "X is not a whole number >= MIN".
CLI::Validator whole_number(long min);

// An option whose text `parse(text, &value)` reads into *target;
// `why_not(text)` is the message when it cannot. Checked before stored, so
// a bad value leaves *target alone.
template <typename T, typename Parse> CLI::Option *add_parsed(CLI::App &app, const std::string &flags, T *target,
                                                              Parse parse,
                                                              std::function<std::string(const std::string &)> why_not,
                                                              const std::string &help, const std::string &type_name) {
    return app
        .add_option_function<std::string>(
            flags, [target, parse](const std::string &text) { parse(text.c_str(), target); }, help)
        ->check(CLI::Validator(
            [parse, why_not](std::string &text) {
                T scratch{};
                return parse(text.c_str(), &scratch) ? std::string() : why_not(text);
            },
            ""))
        ->type_name(type_name);
}

// why_not messages: "unknown KIND 'TEXT'", and "PREFIXTEXT".
std::function<std::string(const std::string &)> unknown(const std::string &kind);
std::function<std::string(const std::string &)> prefixed(const std::string &prefix);

} // namespace nnpccl_tools
