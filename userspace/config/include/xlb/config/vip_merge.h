// SPDX-License-Identifier: Apache-2.0
// Three VIP lists compared VIP by VIP: a base (the configuration file's VIPs
// as last applied), the file now, and what runs (the base plus the changes
// made through the API since). A reload (SIGHUP, POST /v1/reload) and a
// restart both start from this comparison and differ only in what they do
// with a VIP that changed on both sides. Pure logic, no I/O.
#pragma once

#include <string>
#include <vector>

#include "xlb/config/model.h"

namespace xlb::config {

// Which side a start takes for a VIP changed both in the file and at
// runtime (xlbd --prefer file|runtime); kNone: the start refuses.
enum class Prefer { kNone, kFile, kRuntime };
const char* to_string(Prefer);  // "none", "file", "runtime"

struct VipThreeWay {
    std::string key;
    // Null where the list has no such VIP. base is null for every VIP when
    // the base is unknown.
    const VipSpec* base = nullptr;
    const VipSpec* file = nullptr;
    const VipSpec* running = nullptr;
    // The VIP differs from the base (added and removed count). With an
    // unknown base nothing proves which side changed: both are set wherever
    // the file and what runs differ.
    bool file_changed = false;
    bool runtime_changed = false;

    // Both sides changed it, and not to the same version.
    bool conflict() const;
};

// One entry per VIP key in any of the lists, in key order. `base` null: the
// base is unknown. The entries point into the lists, which must outlive them.
std::vector<VipThreeWay> compare_three_way(const std::vector<VipSpec>* base,
                                           const std::vector<VipSpec>& file,
                                           const std::vector<VipSpec>& running);

// A field in which two versions of a VIP differ. `scope` is empty for the
// VIP's own fields and "backend 203.0.113.11" for a backend's; `field` is
// the YAML name, dotted into sections ("health_check.interval"), and empty
// when the backend itself is on one side only (values "present"/"absent").
// Values are written as the file writes them ("drain", "2s", 257).
struct FieldDifference {
    std::string scope;
    std::string field;
    std::string a, b;
};
std::vector<FieldDifference> vip_differences(const VipSpec& a, const VipSpec& b);

// "VIP 198.51.100.10:80/tcp backend 203.0.113.11: state drain at runtime,
// active in the file", one line per difference; a VIP on one side only is
// one line ("present at runtime, absent from the file").
std::vector<std::string> describe_differences(const std::string& key, const VipSpec* running,
                                              const VipSpec* file);

}  // namespace xlb::config
