// SPDX-License-Identifier: Apache-2.0
// Pinned maps: how a restarted agent keeps its state. With a pin directory
// (the agent uses /sys/fs/bpf/xlb/<interface>/), every map of the object is
// looked up there by name before load. A compatible pinned map (same type,
// key size, value size, max_entries and flags; for the rings, inner maps of
// the same kind) is reused, so the connection table, counters, VIPs,
// backends and rings survive; an incompatible one is replaced, and the report
// says which and why so the agent can log it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xlb::bpf {

// What a load does when the pinned connection table has another size than
// the one asked for (LbMapSizes::conntrack_entries); see ConntrackLoad in
// xlb/bpf/programs.h.
enum class ConntrackResize {
    kRefuse,   // keep the pinned table at its own size, entries intact
    kReplace,  // a new table of the requested size; the entries are copied
};

struct LoadOptions {
    // bpffs directory for the maps, created (mode 0700) when missing. Empty:
    // no pinning; the maps live exactly as long as the program object.
    std::string pin_dir;
    ConntrackResize conntrack_resize = ConntrackResize::kRefuse;
    // Load as on a kernel without the BPF crypto kfuncs even where they
    // exist (LbProgram::quic_crypto_available() false): what the tests use
    // to check the program and the refusals of such a kernel here.
    bool without_bpf_crypto = false;
};

enum class PinAction {
    kCreated,   // nothing was pinned under the name: a new map, now pinned
    kReused,    // the pinned map is compatible and was reused, state intact
    kReplaced,  // the pinned map was incompatible: a new map took its place
};
const char* to_string(PinAction);

struct MapPin {
    std::string map;   // "xlb_conntrack3"
    std::string path;  // "/sys/fs/bpf/xlb/eth0/xlb_conntrack3"
    PinAction action = PinAction::kCreated;
    std::string reason;        // kReplaced: what differed, e.g. "max_entries 65536, want 131072"
    std::uint32_t map_id = 0;  // the kernel's id of the map now pinned
};

struct PinReport {
    std::string dir;           // empty: the object was loaded without pinning
    std::vector<MapPin> maps;  // in the object's map order

    bool pinned() const { return !dir.empty(); }
    std::vector<std::string> names(PinAction) const;
    const MapPin* find(const std::string& map) const;
    // One line for the log: "pins in DIR: reused xlb_vips, ...; replaced
    // xlb_conntrack3 (max_entries 65536, want 131072); created ...".
    std::string summary() const;
};

}  // namespace xlb::bpf
