// SPDX-License-Identifier: Apache-2.0
// The fleet's store as xlbctl uses it (fleet.h), over the etcd v3 client.
#include "xlb/etcd/client.h"
#include "xlb/etcd/fleet_options.h"
#include "xlb/xlbctl/fleet.h"

namespace xlb::xlbctl {

namespace {

StoredValue stored(const etcd::KeyValue& kv) {
    return StoredValue{kv.key, kv.value, kv.mod_revision, kv.lease};
}

StoreRead read_of(const etcd::Range& range) {
    StoreRead out;
    out.revision = range.revision;
    for (const etcd::KeyValue& kv : range.kvs) out.kvs.push_back(stored(kv));
    return out;
}

class EtcdStore : public FleetStore {
public:
    explicit EtcdStore(etcd::Client client) : client_(std::move(client)) {}

    Result<StoreRead> get(const std::string& key, std::int64_t revision) override {
        auto range = client_.get(key, revision);
        if (!range) return std::unexpected(std::move(range.error()));
        return read_of(*range);
    }
    Result<StoreRead> get_prefix(const std::string& prefix) override {
        auto range = client_.get_prefix(prefix);
        if (!range) return std::unexpected(std::move(range.error()));
        return read_of(*range);
    }
    // Every key compared at the revision it was read at; refused, the
    // failure branch reads them back, to say who changed them.
    Result<StoreWritten> write(const std::vector<StoreWrite>& writes) override {
        std::vector<etcd::Compare> compares;
        std::vector<etcd::Op> puts, reads;
        for (const StoreWrite& w : writes) {
            compares.push_back(etcd::Compare{w.key, w.expect_revision});
            puts.push_back(etcd::Op::put(w.key, w.value));
            reads.push_back(etcd::Op::get(w.key));
        }
        auto txn = client_.txn(std::move(compares), std::move(puts), std::move(reads));
        if (!txn) return std::unexpected(std::move(txn.error()));
        StoreWritten out;
        out.succeeded = txn->succeeded;
        out.revision = txn->revision;
        if (!txn->succeeded)
            for (const etcd::KeyValue& kv : txn->got) out.now.push_back(stored(kv));
        return out;
    }

private:
    etcd::Client client_;
};

}  // namespace

Result<std::unique_ptr<FleetStore>> open_etcd_store(const config::FleetSettings& fleet,
                                                    std::chrono::milliseconds timeout) {
    etcd::ClientOptions options = etcd::fleet_client_options(fleet);
    // xlbctl's --timeout bounds every step of one command.
    options.dial_timeout = std::min(timeout, options.dial_timeout);
    options.request_timeout = timeout;
    auto client = etcd::Client::open(std::move(options));
    if (!client) return std::unexpected(std::move(client.error()));
    return std::make_unique<EtcdStore>(std::move(*client));
}

}  // namespace xlb::xlbctl
