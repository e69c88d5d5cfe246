#include "command_line.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "parse_size.hpp"

namespace nnpccl_tools {

void house_style(CLI::App &app, int column_width) {
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(static_cast<size_t>(column_width));
}

Parsed parse_command_line(CLI::App &app, int argc, char **argv, std::string *error) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &) {
        return Parsed::Help;
    } catch (const CLI::ParseError &e) {
        *error = e.what();
        return Parsed::Error;
    }
    return Parsed::Run;
}

void exit_usage(const std::string &tool, const std::string &why, const std::string &hint) {
    std::fprintf(stderr, "%s: %s%s\n", tool.c_str(), why.c_str(), hint.empty() ? "" : (" (see " + hint + ")").c_str());
    std::exit(2);
}

void Usage::parse(CLI::App &app, int argc, char **argv) const {
    std::string why;
    switch (parse_command_line(app, argc, argv, &why)) {
    case Parsed::Run: return;
    case Parsed::Help: std::fputs(app.help().c_str(), stdout); std::exit(0);
    case Parsed::Error: error(why);
    }
}

bool read_size(const char *text, size_t *out) {
    const std::optional<size_t> bytes = nnpccl::parse_size(text);
    if (!bytes) return false;
    *out = *bytes;
    return true;
}

bool read_decimal(const char *text, long min, long max, long *out) {
    errno = 0;
    char *end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || value < min || value > max) return false;
    *out = value;
    return true;
}

CLI::Validator size_value() {
    return CLI::Validator(
        [](std::string &text) {
            size_t bytes = 0;
            if (!read_size(text.c_str(), &bytes)) return text + " is not a size (bytes, or with a K, M or G suffix)";
            text = std::to_string(bytes);
            return std::string();
        },
        "");
}

CLI::Validator whole_number(long min) {
    return CLI::Validator(
        [min](std::string &text) {
            long value = 0;
            if (!read_decimal(text.c_str(), min, 1 << 30, &value))
                return text + " is not a whole number >= " + std::to_string(min);
            text = std::to_string(value);
            return std::string();
        },
        "");
}

std::function<std::string(const std::string &)> unknown(const std::string &kind) {
    return [kind](const std::string &text) { return "unknown " + kind + " '" + text + "'"; };
}

std::function<std::string(const std::string &)> prefixed(const std::string &prefix) {
    return [prefix](const std::string &text) { return prefix + text; };
}

} // namespace nnpccl_tools
