// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/data_plane_view.h"

namespace xlb::api {

const char* outcome_name(std::uint32_t outcome) {
    switch (static_cast<xlb_outcome>(outcome)) {
        case XLB_OUT_TX: return "tx";
        case XLB_OUT_TX_ICMP_ERROR: return "tx_icmp_error";
        case XLB_OUT_TX_ICMP_TOO_BIG: return "tx_icmp_too_big";
        case XLB_OUT_PASS_NO_CONFIG: return "pass_no_config";
        case XLB_OUT_PASS_NOT_IP: return "pass_not_ip";
        case XLB_OUT_PASS_NOT_VIP: return "pass_not_vip";
        case XLB_OUT_PASS_FRAGMENT: return "pass_fragment";
        case XLB_OUT_PASS_IPV6_EXT_LIMIT: return "pass_ipv6_ext_limit";
        case XLB_OUT_DROP_MALFORMED_ETH: return "drop_malformed_eth";
        case XLB_OUT_DROP_MALFORMED_IPV4: return "drop_malformed_ipv4";
        case XLB_OUT_DROP_MALFORMED_IPV6: return "drop_malformed_ipv6";
        case XLB_OUT_DROP_MALFORMED_L4: return "drop_malformed_l4";
        case XLB_OUT_DROP_NO_TABLE: return "drop_no_table";
        case XLB_OUT_DROP_NO_BACKEND: return "drop_no_backend";
        case XLB_OUT_DROP_TOO_BIG: return "drop_too_big";
        case XLB_OUT_DROP_FAMILY: return "drop_family";
        case XLB_OUT_DROP_BAD_BACKEND: return "drop_bad_backend";
        case XLB_OUT_DROP_HEADROOM: return "drop_headroom";
        case XLB_OUT_DROP_IPV4_CSUM: return "drop_ipv4_csum";
        case XLB_OUT_DROP_ICMP_QUOTE: return "drop_icmp_quote";
        case XLB_OUT_DROP_SOURCE_DENIED: return "drop_source_denied";
        case XLB_OUT_TX_SYN_COOKIE: return "tx_syn_cookie";
        case XLB_OUT_DROP_COOKIE_INVALID: return "drop_cookie_invalid";
        case XLB_OUT_TX_QUIC_CID: return "tx_quic_cid";
        case XLB_OUT__MAX: break;
    }
    return "unknown";
}

const char* vip_drop_reason(std::uint32_t slot) {
    const std::uint32_t outcome = xlb_vip_drop_outcome(slot);
    switch (outcome) {
        case XLB_OUT_DROP_SOURCE_DENIED: return "source_denied";
        case XLB_OUT_DROP_COOKIE_INVALID: return "cookie_invalid";
        default: return outcome_name(outcome);
    }
}

}  // namespace xlb::api
