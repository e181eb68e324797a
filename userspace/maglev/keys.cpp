// SPDX-License-Identifier: Apache-2.0
//
// Canonical backend keys and prime helpers.

#include <array>
#include <cstdint>
#include <string>

#include "xlb/maglev/maglev.h"

namespace xlb::maglev {
namespace {

void append_decimal(std::string& out, unsigned value) { out += std::to_string(value); }

void append_hex_field(std::string& out, unsigned value) {
    // Lowercase, no leading zeros (RFC 5952 section 4.1 and 4.3).
    static constexpr char kDigits[] = "0123456789abcdef";
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
        const unsigned digit = (value >> shift) & 0xf;
        if (digit != 0 || started || shift == 0) {
            out += kDigits[digit];
            started = true;
        }
    }
}

void append_dotted_quad(std::string& out, const std::uint8_t* bytes) {
    for (int i = 0; i < 4; ++i) {
        if (i != 0) {
            out += '.';
        }
        append_decimal(out, bytes[i]);
    }
}

}  // namespace

std::string canonical_key(const std::array<std::uint8_t, 4>& ipv4, std::uint16_t port) {
    std::string out;
    append_dotted_quad(out, ipv4.data());
    out += ':';
    append_decimal(out, port);
    return out;
}

std::string canonical_key(const std::array<std::uint8_t, 16>& ipv6, std::uint16_t port) {
    std::string out = "[";
    // IPv4-mapped addresses (::ffff:0:0/96) keep their IPv4 part dotted, as
    // RFC 5952 section 5 recommends.
    bool mapped = ipv6[10] == 0xff && ipv6[11] == 0xff;
    for (int i = 0; i < 10; ++i) {
        mapped = mapped && ipv6[i] == 0;
    }
    if (mapped) {
        out += "::ffff:";
        append_dotted_quad(out, ipv6.data() + 12);
    } else {
        std::array<unsigned, 8> fields{};
        for (int i = 0; i < 8; ++i) {
            fields[i] = static_cast<unsigned>(ipv6[2 * i]) << 8 | ipv6[2 * i + 1];
        }
        // "::" replaces the longest run of two or more zero fields, the first
        // such run on a tie (RFC 5952 section 4.2).
        int best_start = -1;
        int best_length = 1;
        for (int i = 0; i < 8;) {
            if (fields[i] != 0) {
                ++i;
                continue;
            }
            int j = i;
            while (j < 8 && fields[j] == 0) {
                ++j;
            }
            if (j - i > best_length) {
                best_start = i;
                best_length = j - i;
            }
            i = j;
        }
        for (int i = 0; i < 8; ++i) {
            if (i == best_start) {
                out += "::";
                i += best_length - 1;
                continue;
            }
            if (i != 0 && i != best_start + best_length) {
                out += ':';
            }
            append_hex_field(out, fields[i]);
        }
    }
    out += "]:";
    append_decimal(out, port);
    return out;
}

bool is_prime(std::uint32_t n) noexcept {
    if (n < 2) {
        return false;
    }
    if (n % 2 == 0) {
        return n == 2;
    }
    for (std::uint32_t d = 3; std::uint64_t{d} * d <= n; d += 2) {
        if (n % d == 0) {
            return false;
        }
    }
    return true;
}

std::uint32_t next_prime(std::uint32_t n) noexcept {
    // 4294967291 is the largest prime below 2^32; callers stay far below it.
    while (!is_prime(n)) {
        ++n;
    }
    return n;
}

}  // namespace xlb::maglev
