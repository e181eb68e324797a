// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "xlb/config/json.h"
#include "xlb/control/reconciler.h"
#include "xlb/files/files.h"
#include "xlb/fnv1a.h"

namespace xlb::api {
namespace {

using json = nlohmann::json;

// Field checks for the parts of the file that are not VipSpecs.
class Reader {
public:
    std::string error;

    bool fail(const std::string& path, const std::string& message) {
        if (error.empty()) error = path + ": " + message;
        return false;
    }
    static std::string found(const json& j) {
        if (j.is_object()) return "an object";
        if (j.is_array()) return "a list";
        return j.dump();
    }
    bool object(const json& j, const std::string& path,
                std::initializer_list<std::string_view> keys, std::string_view what) {
        if (!j.is_object())
            return fail(path, "found " + found(j) + ", expected " + std::string(what));
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
                return fail(path.empty() ? it.key() : path + "." + it.key(),
                            "unknown key, expected one of the keys of " + std::string(what));
        }
        for (std::string_view k : keys) {
            if (!j.contains(std::string(k)))
                return fail(path.empty() ? std::string(k) : path + "." + std::string(k), "missing");
        }
        return true;
    }
    bool uint(const json& j, const std::string& path, std::uint64_t max, std::uint64_t& out) {
        if (!j.is_number_unsigned() || j.get<std::uint64_t>() > max)
            return fail(path,
                        "found " + found(j) + ", expected an integer 0-" + std::to_string(max));
        out = j.get<std::uint64_t>();
        return true;
    }
    bool string(const json& j, const std::string& path, std::string& out) {
        if (!j.is_string()) return fail(path, "found " + found(j) + ", expected a string");
        out = j.get<std::string>();
        return true;
    }
    bool vip_key(const json& j, const std::string& path, std::string& out) {
        std::string text;
        if (!string(j, path, text)) return false;
        auto key = config::parse_vip_key(text);
        if (!key) return fail(path, key.error());
        out = key->to_string();
        return true;
    }
};

}  // namespace

std::string encode_state(const StateFile& state) {
    json epochs = json::object();
    for (const auto& [key, epoch] : state.epochs) epochs[key] = epoch;
    json checksums = json::object();
    for (const auto& [key, checksum] : state.checksums) {
        char hex[17];
        std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(checksum));
        checksums[key] = hex;
    }
    json reserved = json::object();
    for (const auto& [key, epoch] : state.epochs_reserved) reserved[key] = epoch;
    json vip_ids = json::array();
    for (const auto& [key, id] : state.vip_ids) vip_ids.push_back({{"vip", key}, {"id", id}});
    json backend_ids = json::array();
    for (const control::BackendAssignment& a : state.backend_ids)
        backend_ids.push_back({{"vip", a.vip_key},
                               {"address", a.address.to_string()},
                               {"id", a.id},
                               {"generation", a.generation}});
    json j = {{"version", state.version},
              {"config_digest", state.config_digest},
              {"vips", config::vips_to_json(state.vips)},
              {"epochs", epochs},
              {"checksums", checksums},
              {"epochs_reserved", reserved},
              {"ids", {{"vips", vip_ids}, {"backends", backend_ids}}}};
    if (state.config_vips) j["config_vips"] = config::vips_to_json(*state.config_vips);
    return j.dump(2) + "\n";
}

// The state file's per-VIP maps ({"<VIP key>": value}); keys are stored in
// their canonical spelling.
template <class ReadValue>
Result<void> read_per_vip(const json& j, const std::string& name, const std::string& value_noun,
                          std::map<std::string, std::uint64_t>& out, ReadValue read_value) {
    if (!j.is_object())
        return fail(name + ": found " + Reader::found(j) + ", expected an object of VIP key to " +
                    value_noun);
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string path = name + "[\"" + it.key() + "\"]";
        auto key = config::parse_vip_key(it.key());
        if (!key) return fail(path + ": " + key.error());
        auto value = read_value(it.value(), path);
        if (!value) return std::unexpected(value.error());
        out[key->to_string()] = *value;
    }
    return {};
}

Result<StateFile> decode_state(std::string_view text) {
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return fail("not valid JSON (at byte " + std::to_string(e.byte) + "): " + e.what());
    }
    Reader r;
    StateFile out;
    // optional (written since epochs are reserved ahead, and since the file's
    // VIPs are recorded): checked, then set aside
    json checksums = json::object(), reserved = json::object();
    std::optional<json> config_vips;
    if (j.is_object()) {
        if (auto it = j.find("config_vips"); it != j.end()) {
            config_vips = *it;
            j.erase(it);
        }
        if (auto it = j.find("checksums"); it != j.end()) {
            checksums = *it;
            j.erase(it);
        }
        if (auto it = j.find("epochs_reserved"); it != j.end()) {
            reserved = *it;
            j.erase(it);
        }
    }
    if (!r.object(j, "", {"version", "config_digest", "vips", "epochs", "ids"},
                  "a state file: version, config_digest, config_vips, vips, epochs, "
                  "checksums, epochs_reserved, ids"))
        return fail(r.error);
    std::uint64_t version = 0;
    if (!r.uint(j["version"], "version", 1000, version)) return fail(r.error);
    if (version != kStateFileVersion)
        return fail("version: found " + std::to_string(version) + ", expected " +
                    std::to_string(kStateFileVersion) + " (written by a different xlbd version)");
    out.version = static_cast<int>(version);
    if (!r.string(j["config_digest"], "config_digest", out.config_digest)) return fail(r.error);

    auto vips = config::vips_from_json(j["vips"]);
    if (!vips) return fail("vips: " + vips.error());
    out.vips = std::move(*vips);
    if (config_vips) {
        auto base = config::vips_from_json(*config_vips);
        if (!base) return fail("config_vips: " + base.error());
        out.config_vips = std::move(*base);
    }

    auto read_epoch = [&r](const json& v, const std::string& path) -> Result<std::uint64_t> {
        std::uint64_t epoch = 0;
        if (!r.uint(v, path, UINT64_MAX, epoch)) return fail(r.error);
        return epoch;
    };
    auto epochs = read_per_vip(j["epochs"], "epochs", "epoch", out.epochs, read_epoch);
    if (!epochs) return std::unexpected(epochs.error());
    auto sums = read_per_vip(
        checksums, "checksums", "checksum", out.checksums,
        [&r](const json& v, const std::string& path) -> Result<std::uint64_t> {
            std::string text;
            if (!r.string(v, path, text)) return fail(r.error);
            std::uint64_t checksum = 0;
            const bool hex = text.size() == 16 && std::all_of(text.begin(), text.end(), [](char c) {
                                 return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                             });
            if (!hex || std::sscanf(text.c_str(), "%16" SCNx64, &checksum) != 1)
                return fail(path + ": found \"" + text + "\", expected 16 lower-case hex digits");
            return checksum;
        });
    if (!sums) return std::unexpected(sums.error());
    auto bounds =
        read_per_vip(reserved, "epochs_reserved", "epoch", out.epochs_reserved, read_epoch);
    if (!bounds) return std::unexpected(bounds.error());

    const json& ids = j["ids"];
    if (!r.object(ids, "ids", {"vips", "backends"}, "ids: vips, backends")) return fail(r.error);
    if (!ids["vips"].is_array())
        return fail("ids.vips: found " + Reader::found(ids["vips"]) + ", expected a list");
    for (std::size_t i = 0; i < ids["vips"].size(); ++i) {
        const json& item = ids["vips"][i];
        const std::string path = "ids.vips[" + std::to_string(i) + "]";
        std::string key;
        std::uint64_t id = 0;
        if (!r.object(item, path, {"vip", "id"}, "a VIP id: vip, id") ||
            !r.vip_key(item["vip"], path + ".vip", key) ||
            !r.uint(item["id"], path + ".id", UINT32_MAX, id))
            return fail(r.error);
        out.vip_ids.emplace_back(key, static_cast<std::uint32_t>(id));
    }
    if (!ids["backends"].is_array())
        return fail("ids.backends: found " + Reader::found(ids["backends"]) + ", expected a list");
    for (std::size_t i = 0; i < ids["backends"].size(); ++i) {
        const json& item = ids["backends"][i];
        const std::string path = "ids.backends[" + std::to_string(i) + "]";
        control::BackendAssignment a;
        std::string address;
        std::uint64_t id = 0, generation = 0;
        if (!r.object(item, path, {"vip", "address", "id", "generation"},
                      "a backend id: vip, address, id, generation") ||
            !r.vip_key(item["vip"], path + ".vip", a.vip_key) ||
            !r.string(item["address"], path + ".address", address) ||
            !r.uint(item["id"], path + ".id", UINT32_MAX, id) ||
            !r.uint(item["generation"], path + ".generation", UINT32_MAX, generation))
            return fail(r.error);
        auto parsed = net::IpAddress::parse(address);
        if (!parsed) return fail(path + ".address: " + parsed.error());
        a.address = *parsed;
        a.id = static_cast<std::uint32_t>(id);
        a.generation = static_cast<std::uint32_t>(generation);
        out.backend_ids.push_back(std::move(a));
    }
    return out;
}

std::string config_digest(const std::vector<config::VipSpec>& vips) {
    std::vector<const config::VipSpec*> sorted;
    for (const auto& v : vips) sorted.push_back(&v);
    std::sort(sorted.begin(), sorted.end(), [](const config::VipSpec* a, const config::VipSpec* b) {
        return a->vip_key() < b->vip_key();
    });
    json list = json::array();
    for (const config::VipSpec* v : sorted) list.push_back(*v);
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(fnv1a64(list.dump())));
    return hex;
}

StartupDecision decide_startup_vips(const std::vector<config::VipSpec>& config_vips,
                                    const std::optional<StateFile>& state, config::Prefer prefer) {
    StartupDecision d;
    if (!state) {
        d.vips = config_vips;
        return d;
    }
    // The base of the merge: the file's VIPs the state was written against.
    // A recorded list that does not match its digest (edited by hand) proves
    // nothing, like a file written before the list was recorded.
    const bool same_file = state->config_digest == config_digest(config_vips);
    const std::vector<config::VipSpec>* base = nullptr;
    if (same_file)
        base = &config_vips;
    else if (state->config_vips && config_digest(*state->config_vips) == state->config_digest)
        base = &*state->config_vips;
    d.source = same_file ? StartupDecision::Source::kState : StartupDecision::Source::kMerged;

    for (const config::VipThreeWay& w : config::compare_three_way(base, config_vips, state->vips)) {
        const config::VipSpec* take = w.file;
        auto lines = [&w] { return config::describe_differences(w.key, w.running, w.file); };
        if (w.conflict()) {
            if (prefer == config::Prefer::kNone) {
                for (std::string& line : lines()) d.conflicts.push_back(std::move(line));
                continue;
            }
            const bool file = prefer == config::Prefer::kFile;
            take = file ? w.file : w.running;
            d.backup_state = d.backup_state || file;
            const std::string why =
                base ? "changed both in the file and at runtime" : "no record of the file before";
            for (const std::string& line : lines())
                d.warnings.push_back(
                    line + " (" + why + "): --prefer " + config::to_string(prefer) + ": " +
                    (file ? "the file's version" : "the runtime version") + " is used");
        } else if (w.runtime_changed) {
            take = w.running;
            if (!w.file_changed)
                for (const std::string& line : lines())
                    d.warnings.push_back(line +
                                         ": keeping the runtime change (made through the API; "
                                         "the file has not changed this VIP since)");
        }
        if (take) d.vips.push_back(*take);
    }
    // What the previous agent ran, in its order, when nothing was merged.
    if (same_file) d.vips = state->vips;
    return d;
}

Error startup_refusal(const StartupDecision& decision, const std::string& state_path) {
    return make_error(0,
                      std::to_string(decision.conflicts.size()) +
                          " runtime change(s) recorded in " + state_path +
                          " conflict with the configuration file's edits (listed above): a "
                          "start changes nothing until the operator chooses",
                      "restart with --prefer file to use the file's versions (the state file "
                      "is kept as a backup) or --prefer runtime to keep the runtime versions");
}

StateFile snapshot_state(control::Reconciler& reconciler, const std::string& digest) {
    StateFile s;
    s.config_digest = digest;
    s.vips = reconciler.vips();
    for (const auto& [key, record] : reconciler.epoch_records()) {
        s.epochs[key] = record.epoch;
        if (record.checksum) s.checksums[key] = *record.checksum;
        s.epochs_reserved[key] = record.reserved;
    }
    s.vip_ids = reconciler.registry().vip_assignments();
    s.backend_ids = reconciler.registry().backend_assignments();
    return s;
}

std::vector<std::string> restore_ids_and_epochs(control::Reconciler& reconciler,
                                                const StateFile& state) {
    std::vector<std::string> skipped =
        reconciler.registry().restore(state.vip_ids, state.backend_ids);
    std::map<std::string, control::EpochRecord> records;
    for (const auto& [key, epoch] : state.epochs) records[key].epoch = epoch;
    for (const auto& [key, checksum] : state.checksums) records[key].checksum = checksum;
    for (const auto& [key, reserved] : state.epochs_reserved) records[key].reserved = reserved;
    for (auto& [key, record] : records) {
        // a checksum names the recorded epoch's table; without an epoch it names none
        if (record.epoch == 0) record.checksum.reset();
        record.reserved = std::max(record.reserved, record.epoch);
        reconciler.restore_epoch(key, record);
    }
    return skipped;
}

StateStore::StateStore(std::string path) : path_(std::move(path)) {}

StateStore::StateStore(std::string path, std::vector<config::VipSpec> config_vips)
    : path_(std::move(path)) {
    set_config_vips(std::move(config_vips));
}

void StateStore::set_config_vips(std::vector<config::VipSpec> vips) {
    std::string digest = api::config_digest(vips);
    std::lock_guard lock(mu_);
    config_digest_ = std::move(digest);
    config_vips_ = std::move(vips);
}

std::string StateStore::config_digest() const {
    std::lock_guard lock(mu_);
    return config_digest_;
}

Result<std::optional<StateFile>> StateStore::load() const {
    std::lock_guard lock(mu_);
    auto text = files::read_file(path_);
    if (!text) return std::unexpected(std::move(text.error()).add_context("load state file"));
    if (!*text) return std::optional<StateFile>{};
    auto state = decode_state(**text);
    if (!state) return std::unexpected(std::move(state.error()).add_context("state file " + path_));
    return std::optional<StateFile>(std::move(*state));
}

// 0640: the state lists every backend; the API group may read it, others not.
Result<void> StateStore::save(const StateFile& state) const {
    std::lock_guard lock(mu_);
    return with_context(files::write_file_atomic(path_, encode_state(state), 0640),
                        "save state file " + path_);
}

StateFile StateStore::snapshot(control::Reconciler& reconciler) const {
    std::string digest;
    std::optional<std::vector<config::VipSpec>> vips;
    {
        std::lock_guard lock(mu_);
        digest = config_digest_;
        vips = config_vips_;
    }
    StateFile s = snapshot_state(reconciler, digest);
    s.config_vips = std::move(vips);
    return s;
}

Result<void> StateStore::save_current(control::Reconciler& reconciler) const {
    return save(snapshot(reconciler));
}

Result<std::string> StateStore::backup() const {
    std::lock_guard lock(mu_);
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) {
        if (errno == ENOENT) return std::string{};
        return fail_on(errno, "back up state file", path_);
    }
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
    std::string target = path_ + ".bak-" + stamp;
    for (int n = 1; ::access(target.c_str(), F_OK) == 0; ++n)
        target = path_ + ".bak-" + stamp + "-" + std::to_string(n);
    if (::rename(path_.c_str(), target.c_str()) != 0)
        return fail_on(errno, "back up state file", path_ + " to " + target);
    return target;
}

}  // namespace xlb::api
