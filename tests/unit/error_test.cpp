// SPDX-License-Identifier: Apache-2.0
// The one error type: its rendering and the context added on the way up.
#include "xlb/error.h"

#include <gtest/gtest.h>

namespace xlb {
namespace {

Result<int> attach(bool ok) {
    if (!ok) return fail_on(-EOPNOTSUPP, "attach XDP to", "eth0", "try --xdp-mode generic");
    return 7;
}

Result<int> start(bool ok) { return with_context(attach(ok), "start"); }

TEST(Error, RendersWhatObjectErrnoAndHint) {
    EXPECT_EQ(make_error(-ENOENT, "open /x").message(), "open /x: No such file or directory");
    EXPECT_EQ(make_error(ENOENT, "open /x").code, ENOENT);
    EXPECT_EQ(make_error(0, "no group \"x\"", "groupadd x").message(),
              "no group \"x\" (groupadd x)");
    EXPECT_EQ(attach(false).error().message(),
              "attach XDP to eth0: Operation not supported (try --xdp-mode generic)");
}

TEST(Error, ContextIsAddedOutermostFirstAndKeepsTheErrno) {
    EXPECT_EQ(start(true).value(), 7);
    Result<int> r = start(false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, EOPNOTSUPP);
    r.error().add_context("xlbd");
    EXPECT_EQ(r.error().message(),
              "xlbd: start: attach XDP to eth0: Operation not supported (try --xdp-mode generic)");
    Error moved = make_error(0, "parse").add_context("reload");
    EXPECT_EQ(moved.message(), "reload: parse");
}

}  // namespace
}  // namespace xlb
