// SPDX-License-Identifier: Apache-2.0
#include "xlb/etcd/fleet_options.h"

namespace xlb::etcd {

ClientOptions fleet_client_options(const config::FleetSettings& fleet) {
    ClientOptions options;
    options.endpoints = fleet.endpoints;
    options.ca = fleet.ca;
    options.cert = fleet.cert;
    options.key = fleet.key;
    options.dial_timeout = fleet.dial_timeout;
    options.request_timeout = fleet.request_timeout;
    return options;
}

}  // namespace xlb::etcd
