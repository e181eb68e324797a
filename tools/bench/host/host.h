// SPDX-License-Identifier: Apache-2.0
// What the benchmarks need of the machine they run on: one CPU to run on,
// and the kernel and CPU model to print beside their figures.
#pragma once

#include <string>
#include <vector>

namespace xlb::bench {

// Pins the calling thread (and the threads it starts afterwards) to
// `wanted`, or with -1 to the highest CPU it may use
// (CPU 0 usually takes more of the interrupts); returns the CPU. Throws
// std::runtime_error when it cannot.
int pin_to_cpu(int wanted);
// The CPUs this thread may run on now (call before pin_to_cpu narrows it).
std::vector<int> allowed_cpus();
// Pins the calling thread alone to `cpu`. Throws std::runtime_error.
void pin_thread_to_cpu(int cpu);
// uname's release, or "unknown".
std::string kernel_release();
// /proc/cpuinfo's first "model name", or "unknown".
std::string cpu_model();

// The p-th percentile (0-100) of the samples, interpolated between ranks;
// 0 without samples.
double percentile(std::vector<double> samples, double p);

}  // namespace xlb::bench
