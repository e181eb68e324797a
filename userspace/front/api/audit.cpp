// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/audit.h"

#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "xlb/config/vip_merge.h"

namespace xlb::api {

std::string names_or_none(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "none" : out;
}

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string user_name(uid_t uid) {
    long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 4096);
    passwd entry{};
    passwd* found = nullptr;
    while (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == ERANGE &&
           buffer.size() < (1u << 20))
        buffer.resize(buffer.size() * 2);
    return found ? std::string(found->pw_name) : std::string();
}

std::string describe(const Caller& caller) {
    std::string out;
    if (caller.uid) {
        out = "uid " + std::to_string(*caller.uid);
        if (const std::string name = user_name(*caller.uid); !name.empty())
            out += " (" + name + ")";
    } else if (!caller.address.empty()) {
        out = caller.address;
    }
    if (caller.pid)
        out += (out.empty() ? "" : " ") + std::string("pid ") + std::to_string(*caller.pid);
    return out.empty() ? "unknown" : out;
}

std::expected<std::string, std::string> decode_reason(const std::string& header) {
    std::string out;
    for (std::size_t i = 0; i < header.size(); ++i) {
        char c = header[i];
        if (c == '%') {
            const int hi = i + 2 < header.size() ? hex_digit(header[i + 1]) : -1;
            const int lo = hi >= 0 ? hex_digit(header[i + 2]) : -1;
            if (lo < 0)
                return std::unexpected(std::string(kReasonHeader) +
                                       ": '%' not followed by two hex digits (percent-encode "
                                       "the reason, as xlbctl --reason does)");
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
        }
        if (static_cast<unsigned char>(c) < ' ' || c == 0x7f)
            return std::unexpected(std::string(kReasonHeader) +
                                   ": a control character; expected one line of text");
        out += c;
    }
    if (out.size() > kMaxReasonBytes)
        return std::unexpected(std::string(kReasonHeader) + ": " + std::to_string(out.size()) +
                               " bytes, expected at most " + std::to_string(kMaxReasonBytes));
    return out;
}

std::string audit_message(const AuditEntry& e) {
    std::string out = "audit: " + e.request + " by " + describe(e.caller) + ": ";
    // no diff: refused or failed before the change was taken
    if (!e.changes.empty()) out += e.changes + "; ";
    out += "result: ";
    out += e.ok ? e.result : "error: " + e.result;
    if (!e.reason.empty()) out += "; reason: \"" + e.reason + "\"";
    return out;
}

log::Fields audit_fields(const AuditEntry& e) {
    log::Fields out{{log::kEvent, e.event}};
    if (!e.vip.empty()) out.push_back({log::kVip, e.vip});
    if (!e.backend.empty()) out.push_back({log::kBackend, e.backend});
    out.push_back({"REQUEST", e.request});
    if (e.caller.uid) {
        out.push_back({"UID", std::to_string(*e.caller.uid)});
        if (std::string name = user_name(*e.caller.uid); !name.empty())
            out.push_back({"USER", std::move(name)});
    }
    if (e.caller.pid) out.push_back({"PID", std::to_string(*e.caller.pid)});
    if (!e.caller.address.empty()) out.push_back({"PEER", e.caller.address});
    out.push_back({"RESULT", e.ok ? "ok" : "error"});
    if (!e.reason.empty()) out.push_back({"REASON", e.reason});
    return out;
}

void audit(const AuditEntry& entry) {
    log::emit(log::Priority::kNotice, audit_message(entry), audit_fields(entry));
}

std::string vip_changes(const std::vector<config::VipSpec>& before,
                        const std::vector<config::VipSpec>& after) {
    std::vector<std::string> added, removed, changed;
    for (const config::VipThreeWay& w : config::compare_three_way(&before, after, before)) {
        if (!w.file_changed) continue;
        if (!w.file) {
            removed.push_back(w.key);
        } else if (!w.running) {
            added.push_back(w.key);
        } else {
            std::string what;
            for (const config::FieldDifference& d : config::vip_differences(*w.running, *w.file)) {
                what += what.empty() ? "" : ", ";
                what += d.scope;
                if (d.field.empty()) {
                    what += d.b == "present" ? " added" : " removed";
                } else {
                    what += (d.scope.empty() ? "" : " ") + d.field + " " + d.a + " -> " + d.b;
                }
            }
            changed.push_back(what.empty() ? w.key : w.key + " (" + what + ")");
        }
    }
    return "added " + names_or_none(added) + "; removed " + names_or_none(removed) + "; changed " +
           names_or_none(changed);
}

std::string reload_changes(const ReloadReport& r) {
    std::string out = "added " + names_or_none(r.added) + "; removed " + names_or_none(r.removed) +
                      "; changed " + names_or_none(r.changed) +
                      "; settings changed: " + names_or_none(r.settings_changed);
    if (!r.restart_required.empty())
        out += "; at the next restart: " + names_or_none(r.restart_required);
    return out;
}

AuditEntry reload_audit(const ReloadReport& report, std::string request, Caller caller,
                        std::string reason) {
    AuditEntry e;
    e.event = log::kEventReload;
    e.request = std::move(request);
    e.caller = std::move(caller);
    e.reason = std::move(reason);
    e.ok = report.outcome == ReloadReport::Outcome::kApplied;
    if (e.ok) {
        e.changes = reload_changes(report);
        e.result = "ok";
    } else {
        e.result = std::string(to_string(report.outcome)) + ": " + report.error;
    }
    return e;
}

}  // namespace xlb::api
