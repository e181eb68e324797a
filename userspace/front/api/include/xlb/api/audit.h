// SPDX-License-Identifier: Apache-2.0
// The audit log: every change made through the API (and every reload, by
// the API or SIGHUP) is logged once, at notice, with who asked for it, why
// (xlbctl --reason), what changed and how it ended (docs/logging.md,
// "Audit"). One line, e.g.
//   audit: PATCH /v1/backends?vip=198.51.100.10:80/tcp&address=203.0.113.11
//   by uid 1000 (alice): changed 198.51.100.10:80/tcp (backend 203.0.113.11
//   weight 100 -> 50); result: ok; reason: "canary"
// with the same facts as journal fields (XLB_UID, XLB_USER, XLB_RESULT, ...).
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "xlb/api/services.h"
#include "xlb/config/model.h"
#include "xlb/log/event.h"

namespace xlb::api {

// Who asked: the peer credentials of the API socket's connection
// (SO_PEERCRED), the local process behind a TCP connection, a TCP peer's
// address, or the sender of a signal.
struct Caller {
    std::optional<uid_t> uid;
    std::optional<pid_t> pid;
    std::string address;  // a remote TCP peer; empty otherwise
};
// "uid 1000 (alice) pid 4242", "uid 1000", "192.0.2.7", "unknown".
std::string describe(const Caller& caller);
// The user name of `uid` from the password database; empty when it has none.
std::string user_name(uid_t uid);

// X-Xlb-Reason: the reason xlbctl --reason sends, percent-encoded UTF-8.
inline constexpr const char* kReasonHeader = "X-Xlb-Reason";
inline constexpr std::size_t kMaxReasonBytes = 1024;
// The header's value decoded; an error naming the header when it is not
// valid percent-encoding, holds a control character or is longer than
// kMaxReasonBytes once decoded.
std::expected<std::string, std::string> decode_reason(const std::string& header);

struct AuditEntry {
    const char* event = log::kEventApiChange;
    std::string request;  // "POST /v1/backends?vip=..." or "SIGHUP reload"
    Caller caller;
    std::string reason;   // empty: none given
    std::string vip;      // the VIP the change names, if one
    std::string backend;  // the backend it names, if one
    std::string changes;  // what changed; empty: not taken (refused, failed)
    bool ok = false;      // result: ok, or error
    std::string result;   // "ok", "ok (epoch 4, publish live)", or the error
};
std::string audit_message(const AuditEntry& entry);
log::Fields audit_fields(const AuditEntry& entry);
// Logs the entry at notice.
void audit(const AuditEntry& entry);

// "a, b, c", or "none": how the reload report and the audit list keys.
std::string names_or_none(const std::vector<std::string>& names);

// What changed from `before` to `after`, VIP by VIP, as the reload report
// says it ("added A; removed none; changed B"), each changed VIP with its
// field differences ("B (backend 203.0.113.11 weight 100 -> 50)").
std::string vip_changes(const std::vector<config::VipSpec>& before,
                        const std::vector<config::VipSpec>& after);
// A reload report's changes in the same words, with the settings it applied
// and the ones that wait for a restart.
std::string reload_changes(const ReloadReport& report);

// The audit entry of a reload: its changes when applied, else its error.
AuditEntry reload_audit(const ReloadReport& report, std::string request, Caller caller,
                        std::string reason);

}  // namespace xlb::api
