// SPDX-License-Identifier: Apache-2.0
// The client options of a fleet's store as xlbd's and xlbctl's `fleet:`
// sections give them (docs/config.md, "fleet").
#pragma once

#include "xlb/config/model.h"
#include "xlb/etcd/client.h"

namespace xlb::etcd {

ClientOptions fleet_client_options(const config::FleetSettings& fleet);

}  // namespace xlb::etcd
