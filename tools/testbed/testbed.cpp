// SPDX-License-Identifier: Apache-2.0
#include "testbed.h"

#include "xlb/datapath/setup.h"

namespace xlb::test {

config::Settings bench_settings() {
    config::Settings s;
    s.hash_seed = kHashSeed;
    s.encap_source.ipv4 = kEncapSrcV4;
    s.encap_source.ipv4_prefix_len = 32;
    s.encap_source.ipv6 = kEncapSrcV6;
    s.encap_source.ipv6_prefix_len = 128;
    s.mtu = kLinkMtu;
    s.icmp_too_big = false;
    return s;
}

xlb_config bench_config() { return datapath::make_config(bench_settings(), kNextHopMac); }

xlb_flow_key flow_key(const Flow& flow) {
    return datapath::flow_key(net::Endpoint{flow.src, flow.sport},
                              net::Endpoint{flow.dst, flow.dport}, flow.proto);
}

}  // namespace xlb::test
