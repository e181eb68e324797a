// SPDX-License-Identifier: Apache-2.0
// Internal: what LbProgram::load does with pinned connection tables (see
// ConntrackLoad in xlb/bpf/programs.h). Runs inside the PinSession, which
// holds the pin directory's lock throughout:
//
//   auto ct = ConntrackLoader::plan(dir, map, options.conntrack_resize);
//   session->prepare(obj);        // reuses the pinned table when plan() kept it
//   __load(skel)
//   ct->fill(table);              // copies old entries into a new table
//   session->commit();            // pins the new table over the old one
//   ct->finish();                 // unpins tables of older layouts
//
// The copy happens before the commit so that a load that fails or dies half
// way leaves the old pin, entries intact, for the next attempt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xlb/bpf/conntrack_table.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/pin.h"
#include "xlb/bpf/programs.h"

struct bpf_map;

namespace xlb::bpf::detail {

class ConntrackLoader {
public:
    // Before PinSession::prepare: looks at the tables pinned in dir (empty:
    // no pinning) and decides. With kRefuse and a pinned table differing only
    // in size, sizes `map` to the pinned table so that prepare() reuses it.
    static Result<ConntrackLoader> plan(const std::string& dir, bpf_map* map,
                                        ConntrackResize resize);

    // After load, before the commit: copies the entries of the old table (a
    // resize or an older layout) into the new one, `table` (its header
    // written). An entry of no VIP the balancer's VIP map holds is not kept
    // (a layout-5 slot names its flow by its VIP).
    Result<void> fill(const ConntrackTable& table);

    // After the commit: unpins the tables of older layouts, migrated or not.
    Result<void> finish();

    const ConntrackLoad& result() const { return result_; }

private:
    enum class Source { kNone, kResize, kOldLayout };

    std::vector<std::string> old_paths_;  // pins of older layouts to remove
    Source source_ = Source::kNone;
    int source_layout_ = 0;  // kOldLayout: 1 to 4
    UniqueFd source_fd_;
    std::string source_path_;
    std::uint32_t old_capacity_ = 0;  // kResize: the pinned table's size
    std::string old_problem_;         // why the older layout's pin cannot be read
    ConntrackLoad result_;
};

}  // namespace xlb::bpf::detail
