// SPDX-License-Identifier: Apache-2.0
// The set-up the demo, the XDP benchmark and the packet tests give the
// balancer: the documentation addresses of constants.h, built into ABI values
// by the data path's set-up library (xlb/datapath/setup.h), as xlbd does.
#pragma once

#include "constants.h"
#include "packet.h"
#include "xlb/abi.h"
#include "xlb/config/model.h"

namespace xlb::test {

// hash seed kHashSeed, outer sources kEncapSrcV4 / kEncapSrcV6 (full
// prefixes), MTU kLinkMtu, no ICMP "too big" answers.
config::Settings bench_settings();
// datapath::make_config(bench_settings(), kNextHopMac).
xlb_config bench_config();

// The key of a frame's flow (datapath::flow_key).
xlb_flow_key flow_key(const Flow& flow);

}  // namespace xlb::test
