// SPDX-License-Identifier: Apache-2.0
// The fleet's store as xlbctl uses it (fleet.h), over the etcd v3 client.
#include "xlb/xlbctl/fleet.h"

namespace xlb::xlbctl {

Result<std::unique_ptr<FleetStore>> open_etcd_store(const config::FleetSettings&,
                                                    std::chrono::milliseconds) {
    return xlb::fail("this xlbctl was built without the etcd client");
}

}  // namespace xlb::xlbctl
