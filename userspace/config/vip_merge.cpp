// SPDX-License-Identifier: Apache-2.0
#include "xlb/config/vip_merge.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "xlb/config/json.h"

namespace xlb::config {
namespace {

using json = nlohmann::json;

std::map<std::string, const VipSpec*> by_key(const std::vector<VipSpec>& vips) {
    std::map<std::string, const VipSpec*> out;
    for (const auto& v : vips) out.emplace(v.key(), &v);
    return out;
}

const VipSpec* find(const std::map<std::string, const VipSpec*>& vips, const std::string& key) {
    auto it = vips.find(key);
    return it == vips.end() ? nullptr : it->second;
}

bool same(const VipSpec* a, const VipSpec* b) {
    if (!a || !b) return a == b;
    return *a == *b;
}

// As the file writes it: names and durations without quotes.
std::string shown(const json* v) {
    if (!v || v->is_null()) return "unset";
    if (v->is_string()) return v->get<std::string>();
    return v->dump();
}

// The JSON codec names every field as the file does, so comparing the
// encoded forms needs no list of fields that could fall behind the model.
void diff_objects(const json& a, const json& b, const std::string& scope, const std::string& prefix,
                  std::vector<FieldDifference>& out);

void diff_backends(const json& a, const json& b, std::vector<FieldDifference>& out) {
    std::map<std::string, const json*> theirs;
    for (const json& x : b) theirs.emplace(x.at("address").get<std::string>(), &x);
    std::set<std::string> seen;
    for (const json& x : a) {
        const std::string address = x.at("address").get<std::string>();
        seen.insert(address);
        const std::string scope = "backend " + address;
        auto it = theirs.find(address);
        if (it == theirs.end())
            out.push_back({scope, "", "present", "absent"});
        else
            diff_objects(x, *it->second, scope, "", out);
    }
    for (const json& x : b) {
        const std::string address = x.at("address").get<std::string>();
        if (!seen.contains(address)) out.push_back({"backend " + address, "", "absent", "present"});
    }
}

void diff_objects(const json& a, const json& b, const std::string& scope, const std::string& prefix,
                  std::vector<FieldDifference>& out) {
    std::vector<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.push_back(it.key());
    for (auto it = b.begin(); it != b.end(); ++it)
        if (!a.contains(it.key())) keys.push_back(it.key());
    // the VIP's own fields first, its backends last
    const bool vip = scope.empty() && prefix.empty();
    if (vip && a.contains("backends") && b.contains("backends")) {
        std::erase(keys, std::string("backends"));
        keys.push_back("backends");
    }
    for (const std::string& key : keys) {
        const json* x = a.contains(key) ? &a.at(key) : nullptr;
        const json* y = b.contains(key) ? &b.at(key) : nullptr;
        if (x && y && *x == *y) continue;
        if (vip && key == "backends" && x && y && x->is_array() && y->is_array()) {
            diff_backends(*x, *y, out);
        } else if (x && y && x->is_object() && y->is_object()) {
            diff_objects(*x, *y, scope, prefix + key + ".", out);
        } else {
            out.push_back({scope, prefix + key, shown(x), shown(y)});
        }
    }
}

}  // namespace

const char* to_string(Prefer prefer) {
    switch (prefer) {
        case Prefer::kFile: return "file";
        case Prefer::kRuntime: return "runtime";
        case Prefer::kNone: break;
    }
    return "none";
}

bool VipThreeWay::conflict() const {
    return file_changed && runtime_changed && !same(file, running);
}

std::vector<VipThreeWay> compare_three_way(const std::vector<VipSpec>* base,
                                           const std::vector<VipSpec>& file,
                                           const std::vector<VipSpec>& running) {
    const auto before = base ? by_key(*base) : std::map<std::string, const VipSpec*>{};
    const auto after = by_key(file);
    const auto now = by_key(running);
    std::set<std::string> keys;
    for (const auto* list : {&before, &after, &now})
        for (const auto& [key, spec] : *list) keys.insert(key);
    std::vector<VipThreeWay> out;
    out.reserve(keys.size());
    for (const std::string& key : keys) {
        VipThreeWay w{key, find(before, key), find(after, key), find(now, key)};
        if (base) {
            w.file_changed = !same(w.base, w.file);
            w.runtime_changed = !same(w.base, w.running);
        } else {
            w.file_changed = w.runtime_changed = !same(w.file, w.running);
        }
        out.push_back(w);
    }
    return out;
}

std::vector<FieldDifference> vip_differences(const VipSpec& a, const VipSpec& b) {
    std::vector<FieldDifference> out;
    const json x = a, y = b;
    diff_objects(x, y, "", "", out);
    return out;
}

std::vector<std::string> describe_differences(const std::string& key, const VipSpec* running,
                                              const VipSpec* file) {
    if (!running && !file) return {};
    if (!file) return {"VIP " + key + ": at runtime, not in the file"};
    if (!running) return {"VIP " + key + ": in the file, not at runtime"};
    std::vector<std::string> out;
    for (const FieldDifference& d : vip_differences(*running, *file)) {
        std::string line = "VIP " + key + (d.scope.empty() ? "" : " " + d.scope) + ": ";
        if (d.field.empty())
            line +=
                d.a == "present" ? "at runtime, not in the file" : "in the file, not at runtime";
        else
            line += d.field + " " + d.a + " at runtime, " + d.b + " in the file";
        out.push_back(std::move(line));
    }
    return out;
}

}  // namespace xlb::config
