// SPDX-License-Identifier: Apache-2.0
// What a start can check before it touches the kernel. Everything here only
// reads (or creates and removes a probe file), so a failed check leaves the
// host as it was: no pins, no program, no state file.
#pragma once

#include <string>
#include <vector>

#include "xlb/config/model.h"

namespace xlb::agent {

// Checks that hold whether or not an agent runs on the interface now, so
// `xlbd --check-config` runs them too: the interface exists, the API
// group exists, the state file (when present) is readable and valid and its
// directory can take a new file. One message per problem, naming the setting.
std::vector<std::string> check_host(const config::Settings& settings);

// check_host, plus what only a start needs: the pin directory is on a BPF
// filesystem and the metrics address can be bound now.
std::vector<std::string> check_start(const config::Settings& settings);

// The directory of `path` (or its nearest existing ancestor, which a save
// would create the rest under) can take a new file: a probe file is created
// and removed. Root passes permission bits, so this is the only honest test.
std::vector<std::string> check_state_file(const std::string& path);

// Binds the address (SO_REUSEADDR, never SO_REUSEPORT) and closes it again.
std::vector<std::string> check_bindable(const std::string& listen);

bool on_bpf_filesystem(const std::string& dir);

}  // namespace xlb::agent
