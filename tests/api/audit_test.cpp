// SPDX-License-Identifier: Apache-2.0
// The audit entry's words and fields (audit.h): the caller, the reload
// report's diff, the reason header's decoding.
#include "xlb/api/audit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace xlb::api {
namespace {

config::VipSpec vip(const char* address, std::uint32_t weight) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse(address);
    v.port = 80;
    v.ring_size = 251;
    config::BackendSpec b;
    b.address = *net::IpAddress::parse("203.0.113.11");
    b.weight = weight;
    v.backends.push_back(b);
    return v;
}

std::string field(const log::Fields& fields, const std::string& name) {
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const log::Field& f) { return f.name == name; });
    return it == fields.end() ? "<absent>" : it->value;
}

TEST(ApiAudit, VipChangesNameAddedRemovedAndChangedWithTheirFields) {
    const std::vector<config::VipSpec> before = {vip("198.51.100.10", 100),
                                                 vip("198.51.100.11", 100)};
    const std::vector<config::VipSpec> after = {vip("198.51.100.10", 5), vip("198.51.100.12", 100)};
    EXPECT_EQ(vip_changes(before, after),
              "added 198.51.100.12:80/tcp; removed 198.51.100.11:80/tcp; changed "
              "198.51.100.10:80/tcp (backend 203.0.113.11 weight 100 -> 5)");
    EXPECT_EQ(vip_changes(before, before), "added none; removed none; changed none");
}

TEST(ApiAudit, AnEntryReadsOnItsOwnAndCarriesItsFields) {
    AuditEntry e;
    e.request = "PATCH /v1/backends?vip=198.51.100.10:80/tcp&address=203.0.113.11";
    e.caller.uid = ::getuid();
    e.caller.pid = 4242;
    e.reason = "canary";
    e.vip = "198.51.100.10:80/tcp";
    e.backend = "203.0.113.11";
    e.changes = "added none; removed none; changed 198.51.100.10:80/tcp";
    e.ok = true;
    e.result = "ok";
    const std::string who = describe(e.caller);
    EXPECT_TRUE(who.starts_with("uid " + std::to_string(::getuid()))) << who;
    EXPECT_TRUE(who.ends_with(" pid 4242")) << who;
    EXPECT_EQ(audit_message(e), "audit: " + e.request + " by " + who + ": " + e.changes +
                                    "; result: ok; reason: \"canary\"");
    const log::Fields f = audit_fields(e);
    EXPECT_EQ(field(f, "EVENT"), "api_change");
    EXPECT_EQ(field(f, "VIP"), "198.51.100.10:80/tcp");
    EXPECT_EQ(field(f, "BACKEND"), "203.0.113.11");
    EXPECT_EQ(field(f, "UID"), std::to_string(::getuid()));
    EXPECT_EQ(field(f, "PID"), "4242");
    EXPECT_EQ(field(f, "RESULT"), "ok");
    EXPECT_EQ(field(f, "REASON"), "canary");
    EXPECT_EQ(field(f, "PEER"), "<absent>");

    AuditEntry remote;
    remote.request = "POST /v1/reload";
    remote.caller.address = "192.0.2.7";
    remote.result = "invalid: x.yaml has 1 error(s)";
    EXPECT_EQ(audit_message(remote),
              "audit: POST /v1/reload by 192.0.2.7: result: error: invalid: x.yaml has 1 "
              "error(s)");
    EXPECT_EQ(field(audit_fields(remote), "PEER"), "192.0.2.7");
    EXPECT_EQ(field(audit_fields(remote), "RESULT"), "error");
    EXPECT_EQ(describe(Caller{}), "unknown");
}

TEST(ApiAudit, ReloadEntryUsesTheReportsDiff) {
    ReloadReport applied;
    applied.added = {"198.51.100.30:80/tcp"};
    applied.changed = {"198.51.100.10:80/tcp", "[2001:db8::10]:443/tcp"};
    applied.settings_changed = {"mtu"};
    applied.restart_required = {"api.socket"};
    Caller root;
    root.uid = 0;
    const AuditEntry e = reload_audit(applied, "SIGHUP reload", root, "");
    EXPECT_STREQ(e.event, "reload");
    EXPECT_TRUE(e.ok);
    EXPECT_EQ(e.changes,
              "added 198.51.100.30:80/tcp; removed none; changed 198.51.100.10:80/tcp, "
              "[2001:db8::10]:443/tcp; settings changed: mtu; at the next restart: api.socket");

    ReloadReport refused;
    refused.outcome = ReloadReport::Outcome::kDisruptiveRefused;
    refused.error = "1 change(s) would move established flows";
    const AuditEntry r = reload_audit(refused, "POST /v1/reload", root, "why");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.changes, "");
    EXPECT_EQ(r.result, "disruptive_refused: 1 change(s) would move established flows");
    EXPECT_EQ(field(audit_fields(r), "REASON"), "why");
}

TEST(ApiAudit, ReasonHeaderIsPercentDecodedOneLineAndBounded) {
    EXPECT_EQ(decode_reason("kernel upgrade").value(), "kernel upgrade");
    EXPECT_EQ(decode_reason("kernel%20upgrade%3A%20r%C3%A9seau").value(),
              "kernel upgrade: r\xc3\xa9seau");
    EXPECT_FALSE(decode_reason("two%0Alines"));
    EXPECT_FALSE(decode_reason("tab\there"));
    EXPECT_FALSE(decode_reason("50%"));
    EXPECT_FALSE(decode_reason("%4"));
    EXPECT_FALSE(decode_reason("%zz"));
    EXPECT_TRUE(decode_reason(std::string(kMaxReasonBytes, 'x')));
    EXPECT_FALSE(decode_reason(std::string(kMaxReasonBytes + 1, 'x')));
    EXPECT_NE(decode_reason("%zz").error().find("X-Xlb-Reason"), std::string::npos);
}

}  // namespace
}  // namespace xlb::api
