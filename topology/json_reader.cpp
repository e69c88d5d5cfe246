// Recursive descent over the JSON grammar, one pass, O(size of the text).
// Positions are tracked as it advances; the member path is kept as a stack
// so a syntax error deep inside the file still says which field it was in.
#include "json_reader.hpp"

#include <cerrno>
#include <cstdlib>

namespace nnpccl {

const JsonValue *JsonValue::find(const std::string &key) const {
    for (const JsonMember &m : members)
        if (m.key == key) return &m.value;
    return nullptr;
}

const char *JsonValue::kind_name() const {
    switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
    }
    return "a value";
}

std::string printable(const std::string &text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (i == 40) return out + "...";
        auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x7f) {
            const char *hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    Parser(const std::string &text, JsonError *error) : text_(text), error_(error) {}

    bool parse_document(JsonValue *out) {
        skip_space();
        if (!parse_value(out, 0)) return false;
        skip_space();
        if (pos_ < text_.size()) return fail("unexpected content after the end of the document");
        return true;
    }

private:
    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }

    void advance() {
        if (text_[pos_] == '\n') {
            ++line_;
            column_ = 1;
        } else {
            ++column_;
        }
        ++pos_;
    }

    void skip_space() {
        while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) advance();
    }

    std::string path() const {
        std::string p;
        for (const std::string &part : path_) {
            if (!p.empty() && part[0] != '[') p += '.';
            p += printable(part);
        }
        return p;
    }

    bool fail(const std::string &message) { return fail_at(line_, column_, message); }
    bool fail_at(int line, int column, const std::string &message) {
        error_->line = line;
        error_->column = column;
        error_->path = path();
        error_->message = message;
        return false;
    }

    std::string describe_here() const {
        if (at_end()) return "the end of the file";
        char c = peek();
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return "a byte that is not JSON";
        return std::string("'") + c + "'";
    }

    bool parse_value(JsonValue *out, int depth) {
        out->line = line_;
        out->column = column_;
        if (depth > kMaxDepth) return fail("nesting deeper than 64 levels");
        char c = peek();
        if (c == '{') return parse_object(out, depth);
        if (c == '[') return parse_array(out, depth);
        if (c == '"') {
            out->kind = JsonValue::Kind::String;
            return parse_string(&out->text);
        }
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
        if (literal("true")) {
            out->kind = JsonValue::Kind::Bool;
            out->boolean = true;
            return true;
        }
        if (literal("false")) {
            out->kind = JsonValue::Kind::Bool;
            return true;
        }
        if (literal("null")) {
            out->kind = JsonValue::Kind::Null;
            return true;
        }
        return fail("expected a value, found " + describe_here());
    }

    bool literal(const char *word) {
        size_t n = std::char_traits<char>::length(word);
        if (text_.compare(pos_, n, word) != 0) return false;
        for (size_t i = 0; i < n; ++i) advance();
        return true;
    }

    bool parse_object(JsonValue *out, int depth) {
        out->kind = JsonValue::Kind::Object;
        advance(); // '{'
        skip_space();
        if (peek() == '}') {
            advance();
            return true;
        }
        for (;;) {
            if (peek() != '"') return fail("expected a member name in double quotes, found " + describe_here());
            JsonMember member;
            member.line = line_;
            member.column = column_;
            if (!parse_string(&member.key)) return false;
            if (out->find(member.key) != nullptr)
                return fail_at(member.line, member.column, "member \"" + printable(member.key) + "\" is given twice");
            skip_space();
            if (peek() != ':')
                return fail("expected ':' after \"" + printable(member.key) + "\", found " + describe_here());
            advance();
            skip_space();
            path_.push_back(member.key);
            if (!parse_value(&member.value, depth + 1)) return false;
            path_.pop_back();
            out->members.push_back(std::move(member));
            skip_space();
            if (peek() == ',') {
                advance();
                skip_space();
                continue;
            }
            if (peek() == '}') {
                advance();
                return true;
            }
            return fail("expected ',' or '}' after a member, found " + describe_here());
        }
    }

    bool parse_array(JsonValue *out, int depth) {
        out->kind = JsonValue::Kind::Array;
        advance(); // '['
        skip_space();
        if (peek() == ']') {
            advance();
            return true;
        }
        for (;;) {
            path_.push_back("[" + std::to_string(out->items.size()) + "]");
            out->items.emplace_back();
            if (!parse_value(&out->items.back(), depth + 1)) return false;
            path_.pop_back();
            skip_space();
            if (peek() == ',') {
                advance();
                skip_space();
                continue;
            }
            if (peek() == ']') {
                advance();
                return true;
            }
            return fail("expected ',' or ']' after an array element, found " + describe_here());
        }
    }

    static int hex_digit(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    bool parse_hex4(unsigned *out) {
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            int d = hex_digit(peek());
            if (d < 0) return fail("expected four hex digits after \\u");
            v = v * 16 + static_cast<unsigned>(d);
            advance();
        }
        *out = v;
        return true;
    }

    static void append_utf8(unsigned cp, std::string *out) {
        if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
            out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else {
            out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }

    bool parse_string(std::string *out) {
        advance(); // opening quote
        for (;;) {
            if (at_end()) return fail("unterminated string");
            char c = peek();
            if (c == '"') {
                advance();
                return true;
            }
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character inside a string (escape it)");
            if (c != '\\') {
                out->push_back(c);
                advance();
                continue;
            }
            advance();
            if (at_end()) return fail("unterminated string");
            char e = peek();
            const char *simple = "\"\\/bfnrt";
            const char *meaning = "\"\\/\b\f\n\r\t";
            const char *hit = std::char_traits<char>::find(simple, 8, e);
            if (hit != nullptr) {
                out->push_back(meaning[hit - simple]);
                advance();
                continue;
            }
            if (e != 'u') return fail("unknown escape in a string: a backslash followed by " + describe_here());
            advance();
            unsigned cp = 0;
            if (!parse_hex4(&cp)) return false;
            if (cp >= 0xd800 && cp < 0xdc00) { // a surrogate pair: the low half must follow
                unsigned low = 0;
                if (!literal("\\u") || !parse_hex4(&low) || low < 0xdc00 || low >= 0xe000)
                    return fail("a \\u escape of a high surrogate must be followed by a low one");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                return fail("a lone low surrogate in a \\u escape");
            }
            append_utf8(cp, out);
        }
    }

    bool digits() {
        if (!(peek() >= '0' && peek() <= '9')) return false;
        while (peek() >= '0' && peek() <= '9') advance();
        return true;
    }

    bool parse_number(JsonValue *out) {
        out->kind = JsonValue::Kind::Number;
        size_t start = pos_;
        if (peek() == '-') advance();
        if (peek() == '0') {
            advance();
            if (peek() >= '0' && peek() <= '9') return fail("a number may not have leading zeros");
        } else if (!digits()) {
            return fail("expected digits in a number, found " + describe_here());
        }
        if (peek() == '.') {
            advance();
            if (!digits()) return fail("expected digits after the decimal point, found " + describe_here());
        }
        if (peek() == 'e' || peek() == 'E') {
            advance();
            if (peek() == '+' || peek() == '-') advance();
            if (!digits()) return fail("expected digits in the exponent, found " + describe_here());
        }
        out->text = text_.substr(start, pos_ - start);
        errno = 0;
        out->number = std::strtod(out->text.c_str(), nullptr);
        if (errno == ERANGE && (out->number > 1 || out->number < -1))
            return fail_at(out->line, out->column, "number " + out->text + " is out of range");
        return true;
    }

    const std::string &text_;
    JsonError *error_;
    size_t pos_ = 0;
    int line_ = 1;
    int column_ = 1;
    std::vector<std::string> path_;
};

} // namespace

bool parse_json(const std::string &text, JsonValue *out, JsonError *error) {
    *out = JsonValue();
    Parser parser(text, error);
    return parser.parse_document(out);
}

} // namespace nnpccl
