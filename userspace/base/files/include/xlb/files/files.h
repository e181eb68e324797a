// SPDX-License-Identifier: Apache-2.0
// Whole-file reads and atomic replacement, for files other processes read
// while the agent rewrites them (BIRD's include file, the state file): a
// reader sees the old content or the new, never a mix and never nothing.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "xlb/error.h"

namespace xlb::files {

// "/a/b/c" -> "/a/b"; "c" -> "."; "/c" -> "/".
std::string parent_dir(const std::string& path);

// mkdir -p; directories it creates get `mode`, existing ones are left as they
// are. The error names the directory.
Result<void> make_dirs(const std::string& dir, mode_t mode = 0755);

// The file's content; nullopt when it does not exist.
Result<std::optional<std::string>> read_file(const std::string& path);

// Replaces `path` with `content`: `<path>.tmp` in the same directory, written,
// given `mode` (explicitly: the process umask must not decide who can read
// it), fsync'd, renamed over `path`, then the directory fsync'd so the
// rename survives a crash. Creates missing parent directories (0755).
// The temporary name ends in ".tmp" so that globs such as "*.conf" never
// match a half-written file.
Result<void> write_file_atomic(const std::string& path, std::string_view content,
                               mode_t mode = 0644);

}  // namespace xlb::files
