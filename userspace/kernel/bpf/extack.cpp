// SPDX-License-Identifier: Apache-2.0
#include "extack.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string_view>

namespace xlb::bpf::detail {
namespace {

std::mutex g_print_mutex;
std::atomic<libbpf_print_fn_t> g_previous_print{nullptr};
thread_local std::string* t_extack = nullptr;

int capture_print(enum libbpf_print_level level, const char* fmt, va_list args) {
    if (t_extack != nullptr && level == LIBBPF_WARN) {
        va_list copy;
        va_copy(copy, args);
        char buf[512];
        int n = std::vsnprintf(buf, sizeof buf, fmt, copy);
        va_end(copy);
        std::string_view line(buf, n > 0 ? std::min<std::size_t>(n, sizeof buf - 1) : 0);
        constexpr std::string_view kPrefix = "libbpf: Kernel error message: ";
        if (line.starts_with(kPrefix)) {
            line.remove_prefix(kPrefix.size());
            while (!line.empty() && (line.back() == '\n' || line.back() == ' '))
                line.remove_suffix(1);
            *t_extack = line;
            return 0;  // it becomes part of our error instead
        }
    }
    libbpf_print_fn_t previous = g_previous_print.load();
    return previous ? previous(level, fmt, args) : 0;
}

}  // namespace

ExtackCapture::ExtackCapture() : lock_(g_print_mutex) {
    g_previous_print.store(libbpf_set_print(capture_print));
    t_extack = &message_;
}

ExtackCapture::~ExtackCapture() {
    t_extack = nullptr;
    libbpf_set_print(g_previous_print.load());
}

}  // namespace xlb::bpf::detail
