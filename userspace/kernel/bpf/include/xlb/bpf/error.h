// SPDX-License-Identifier: Apache-2.0
// The BPF library reports errors with the project's one error type.
#pragma once

#include "xlb/error.h"

namespace xlb::bpf {

using xlb::Error;
using xlb::fail;
using xlb::fail_on;
using xlb::make_error;
using xlb::Result;

}  // namespace xlb::bpf
