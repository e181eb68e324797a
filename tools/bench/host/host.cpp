// SPDX-License-Identifier: Apache-2.0
#include "host.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace xlb::bench {

std::vector<int> allowed_cpus() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        throw std::runtime_error(fmt::format("read the CPU affinity: {}", std::strerror(errno)));
    std::vector<int> cpus;
    for (int i = 0; i < CPU_SETSIZE; ++i)
        if (CPU_ISSET(i, &allowed)) cpus.push_back(i);
    return cpus;
}

void pin_thread_to_cpu(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(one), &one); rc != 0)
        throw std::runtime_error(fmt::format("pin a thread to CPU {}: {}", cpu, std::strerror(rc)));
}

int pin_to_cpu(int wanted) {
    const std::vector<int> cpus = allowed_cpus();
    if (cpus.empty()) throw std::runtime_error("this process may run on no CPU");
    const int cpu = wanted < 0 ? cpus.back() : wanted;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end())
        throw std::runtime_error(fmt::format("CPU {} is not available to this process", cpu));
    // The calling thread; threads it starts later inherit the pinning.
    pin_thread_to_cpu(cpu);
    return cpu;
}

std::string kernel_release() {
    utsname u{};
    return uname(&u) == 0 ? u.release : "unknown";
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown";
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0;
    const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(rank);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace xlb::bench
