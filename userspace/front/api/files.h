// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: the socket set-up's group lookup (files themselves:
// userspace/files).
#pragma once

#include <expected>
#include <string>

#include "xlb/api/server.h"  // resolve_group
#include "xlb/error.h"
