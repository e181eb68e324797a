// SPDX-License-Identifier: Apache-2.0
#include "codec.h"

#include <array>
#include <charconv>
#include <stdexcept>

namespace xlb::etcd::codec {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> decode_table() {
    std::array<std::int8_t, 256> table{};
    table.fill(-1);
    for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
        table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
    }
    return table;
}
constexpr auto kDecode = decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t n = static_cast<unsigned char>(bytes[i]) << 16 |
                                static_cast<unsigned char>(bytes[i + 1]) << 8 |
                                static_cast<unsigned char>(bytes[i + 2]);
        out += kAlphabet[n >> 18 & 63];
        out += kAlphabet[n >> 12 & 63];
        out += kAlphabet[n >> 6 & 63];
        out += kAlphabet[n & 63];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
        if (rest == 2) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        out += kAlphabet[n >> 18 & 63];
        out += kAlphabet[n >> 12 & 63];
        out += rest == 2 ? kAlphabet[n >> 6 & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    if (text.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(text.size() * 3 / 4);
    std::uint32_t bits = 0;
    int count = 0;
    for (const char c : text) {
        const std::int8_t v = kDecode[static_cast<unsigned char>(c)];
        if (v < 0) return std::nullopt;
        bits = bits << 6 | static_cast<std::uint32_t>(v);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out += static_cast<char>(bits >> count & 0xff);
        }
    }
    return out;
}

std::int64_t int64_field(const nlohmann::json& object, const char* name) {
    const auto it = object.find(name);
    if (it == object.end() || it->is_null()) return 0;
    if (it->is_number_integer()) return it->get<std::int64_t>();
    const auto& text = it->get_ref<const std::string&>();
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
        throw std::runtime_error(std::string("field ") + name + " is not an integer: '" + text +
                                 "'");
    }
    return value;
}

std::string bytes_field(const nlohmann::json& object, const char* name) {
    const auto it = object.find(name);
    if (it == object.end() || it->is_null()) return {};
    auto bytes = base64_decode(it->get_ref<const std::string&>());
    if (!bytes) throw std::runtime_error(std::string("field ") + name + " is not base64");
    return std::move(*bytes);
}

KeyValue key_value(const nlohmann::json& kv) {
    KeyValue out;
    out.key = bytes_field(kv, "key");
    out.value = bytes_field(kv, "value");
    out.create_revision = int64_field(kv, "create_revision");
    out.mod_revision = int64_field(kv, "mod_revision");
    out.version = int64_field(kv, "version");
    out.lease = int64_field(kv, "lease");
    return out;
}

std::int64_t header_revision(const nlohmann::json& answer) {
    const auto header = answer.find("header");
    if (header == answer.end()) return 0;
    return int64_field(*header, "revision");
}

std::vector<KeyValue> kvs(const nlohmann::json& range_response) {
    std::vector<KeyValue> out;
    const auto list = range_response.find("kvs");
    if (list == range_response.end()) return out;
    out.reserve(list->size());
    for (const auto& kv : *list) out.push_back(key_value(kv));
    return out;
}

nlohmann::json range_request(std::string_view key, bool prefix, std::int64_t revision) {
    nlohmann::json request = {{"key", base64_encode(key)}};
    if (prefix) request["range_end"] = base64_encode(prefix_end(key));
    if (revision != 0) request["revision"] = std::to_string(revision);
    return request;
}

nlohmann::json request_op(const Op& op) {
    switch (op.type) {
        case Op::Type::kPut: {
            nlohmann::json put = {{"key", base64_encode(op.key)},
                                  {"value", base64_encode(op.value)}};
            if (op.lease != 0) put["lease"] = std::to_string(op.lease);
            return {{"request_put", std::move(put)}};
        }
        case Op::Type::kDelete: {
            nlohmann::json del = {{"key", base64_encode(op.key)}};
            if (op.prefix) del["range_end"] = base64_encode(prefix_end(op.key));
            return {{"request_delete_range", std::move(del)}};
        }
        case Op::Type::kGet: return {{"request_range", range_request(op.key, op.prefix, 0)}};
    }
    return {};
}

nlohmann::json compare(const Compare& compare) {
    // "Does not exist" is create_revision 0: a key that was deleted has no
    // create revision either, whatever its history.
    if (compare.mod_revision == 0) {
        return {{"key", base64_encode(compare.key)},
                {"target", "CREATE"},
                {"create_revision", "0"},
                {"result", "EQUAL"}};
    }
    return {{"key", base64_encode(compare.key)},
            {"target", "MOD"},
            {"mod_revision", std::to_string(compare.mod_revision)},
            {"result", "EQUAL"}};
}

std::string error_text(const nlohmann::json& answer) {
    if (!answer.is_object()) return {};
    const auto error = answer.find("error");
    if (error != answer.end()) {
        if (error->is_string()) return error->get<std::string>();
        if (error->is_object()) {
            const auto message = error->find("message");
            if (message != error->end() && message->is_string()) return message->get<std::string>();
            return error->dump();
        }
    }
    const auto message = answer.find("message");
    if (message != answer.end() && message->is_string()) return message->get<std::string>();
    return {};
}

}  // namespace xlb::etcd::codec
