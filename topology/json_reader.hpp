// A small JSON reader that remembers where every value came from, so that a
// topology file's errors can name the line and column (and the field) that
// is wrong. It accepts RFC 8259 JSON and nothing else; it never throws.
#pragma once

#include <string>
#include <vector>

namespace nnpccl {

struct JsonMember;

struct JsonValue {
    enum class Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Kind::Null;
    int line = 1;   // 1-based position of the value's first character
    int column = 1; // 1-based, in bytes
    bool boolean = false;
    double number = 0;
    std::string text;               // a string's value; a number's spelling
    std::vector<JsonValue> items;   // Array
    std::vector<JsonMember> members; // Object, in file order

    // The member named `key`, or nullptr (objects only).
    const JsonValue *find(const std::string &key) const;
    // "an object", "a number", ... for messages.
    const char *kind_name() const;
};

struct JsonMember {
    std::string key;
    int line = 1; // where the key starts
    int column = 1;
    JsonValue value;
};

struct JsonError {
    int line = 1;
    int column = 1;
    std::string path;    // the member being read, e.g. "links[3].gbps"; empty at the top
    std::string message; // what was expected
};

// `text` made safe to quote in a one-line message: control characters and
// bytes outside ASCII are written as \xNN, and anything past 40 bytes cut.
std::string printable(const std::string &text);

// Parses the whole of `text` as one JSON value. Duplicate keys in an object,
// nesting deeper than 64 levels and trailing content are errors.
bool parse_json(const std::string &text, JsonValue *out, JsonError *error);

} // namespace nnpccl
