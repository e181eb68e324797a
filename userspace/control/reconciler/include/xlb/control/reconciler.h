// SPDX-License-Identifier: Apache-2.0
// The reconciler: owns the desired state (VIPs and backends) and the observed
// state (health, weight factors), turns them into each VIP's effective
// backends and publishes tables through a DataPlane. It is single-threaded by
// design: ControlLoop (loop.h) runs it on one thread and gives table builds
// to a worker; tests drive it directly with a fake DataPlane.
//
// Order of writes, so that no packet ever meets a half-made state:
//  - a backend's map entry is written before any ring names it;
//  - a VIP's ring is live before its VIP entry makes packets look for it;
//  - a backend leaves the ring first; only then is its generation bumped
//    (its recorded flows re-pick from the new ring) or its id released.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/control/data_plane.h"
#include "xlb/control/effective.h"
#include "xlb/control/registry.h"
#include "xlb/maglev/maglev.h"

namespace xlb::control {

using Clock = std::chrono::steady_clock;

// A table to build, self-contained so a worker thread can build it.
struct BuildJob {
    std::string vip_key;
    std::uint64_t plan_version = 0;
    std::uint32_t ring_size = 0;
    std::vector<maglev::Backend> members;   // in-table backends: identity, effective weight
    std::vector<std::uint32_t> member_ids;  // their backend ids, same order
    Clock::time_point decided_at;
};

struct BuildResult {
    std::string vip_key;
    std::uint64_t plan_version = 0;
    std::optional<Error> error;       // set: the build failed
    std::vector<std::uint32_t> ring;  // backend id per slot
    std::uint64_t checksum = 0;
    std::vector<std::uint32_t> slots;  // per member, same order as the job
    Clock::time_point decided_at;
};

// Pure: runs the Maglev builder for a job.
BuildResult build_table(const BuildJob& job);

struct PublishRecord {
    std::string vip_key;
    std::uint64_t epoch = 0;
    std::uint64_t checksum = 0;
    double decision_to_live_ms = 0;    // decision until the outer update was issued
    double decision_to_return_ms = 0;  // until the update call returned
};

struct BackendStatus {
    net::IpAddress address;
    config::AdminState state = config::AdminState::kActive;
    Health health = Health::kUnknown;        // what the table follows
    Health local_health = Health::kUnknown;  // this host's probes (ObservedBackend)
    std::uint32_t weight = 0;                // configured
    std::uint32_t effective_weight = 0;      // in the published table (scaled)
    double weight_factor = 1.0;
    std::uint32_t slots = 0;  // in the published table
    bool in_table = false;
    bool live = false;
    std::optional<std::uint32_t> id;
    std::uint32_t generation = 0;
};

// A VIP entering or leaving panic (or changing its reason), for the log.
struct PanicChange {
    std::string vip_key;
    PanicReason from = PanicReason::kNone;
    PanicReason to = PanicReason::kNone;
    double healthy_share = 0;
    double threshold = 0;
};

// A VIP that could not be applied (publish refused, a map write failed, no
// id left) and when it is tried again.
struct ApplyFailure {
    std::string vip_key;
    Error error;
    Clock::duration retry_in{};
};

struct VipStatus {
    config::VipSpec spec;
    std::optional<std::uint32_t> vip_id;
    std::uint64_t epoch = 0;  // 0: never published
    std::uint64_t checksum = 0;
    PanicReason panic = PanicReason::kNone;
    double healthy_share = 0;
    // Not every active backend has had its first verdict yet (the VIP uses
    // them all meanwhile: panic "awaiting_first_verdicts").
    bool starting = false;
    // Times the VIP went into panic below its threshold (start-up panic is
    // not counted: it is by construction, not an event).
    std::uint64_t panic_entries = 0;
    bool published = false;  // the current desired state is live
    // Since the agent started: tables that went live, and attempts to apply
    // the VIP that failed (each retried after a back-off).
    std::uint64_t applies_published = 0;
    std::uint64_t applies_failed = 0;
    std::string last_error;
    std::vector<BackendStatus> backends;
};

// What a change to a VIP would do to its table, without publishing it
// (xlbctl --dry-run). Slots are compared by owner (backend address).
struct TablePrediction {
    struct Backend {
        net::IpAddress address;
        std::uint32_t slots_before = 0;  // in the live table
        std::uint32_t slots_after = 0;   // in the table the change gives
    };
    std::uint64_t epoch = 0;        // of the live table compared against
    std::uint32_t ring_size = 0;    // of the table the change gives
    std::uint64_t checksum = 0;     // of the table the change gives
    std::uint32_t slots_moved = 0;  // slots whose owner would change
    std::vector<Backend> backends;  // every backend before or after, by address
};

// What has to outlive the process for a VIP's epochs to keep their promise
// (every epoch names one table, and epochs only grow, across restarts and a
// kill -9 at any instant): the state file keeps one per VIP.
struct EpochRecord {
    std::uint64_t epoch = 0;                // of the last table this process knew live
    std::optional<std::uint64_t> checksum;  // of that table (nullopt: not known)
    // No epoch above this one has named a table: a new epoch is reserved
    // here (written through the EpochJournal) before a table can take it.
    std::uint64_t reserved = 0;
};

class Reconciler {
public:
    // Makes the reconciler's epoch_records() durable (the agent writes the
    // state file); an error is the journal's own to report. Called on the
    // thread that calls publish(), from inside it.
    using EpochJournal = std::function<Result<void>(Reconciler&)>;

    // Epochs reserved at a time: a journal write per this many publishes
    // of a VIP at most (half of them on the publish path's far side, after
    // the tables went live), and the largest jump of its epoch after a
    // kill -9.
    static constexpr std::uint64_t kEpochReserve = 16;

    struct Options {
        std::uint32_t max_vips = XLB_MAX_VIPS_DEFAULT;
        std::uint32_t max_backends = XLB_MAX_BACKENDS_DEFAULT;
        // Second chance (docs/second-chance.md): how long a VIP keeps its
        // previous ring after each new one; nullopt: off (no previous rings).
        std::optional<Clock::duration> second_chance_window;
        // The settings' encap: SYN cookies need gue (config::
        // effective_syn_cookies), which the VIP flags follow.
        config::Encap encap = config::Encap::kIpip;
    };

    Reconciler(DataPlane& data_plane, Options options);

    IdRegistry& registry() { return registry_; }

    // Second chance on (the window) or off (nullopt), e.g. after a reload:
    // from the next publish; turned off, every previous ring goes at the
    // next expire_previous_rings().
    void set_second_chance(std::optional<Clock::duration> window);
    // The settings' encap changed (a reload): every VIP's flags are written
    // again at the next plan.
    void set_encap(config::Encap encap);
    // The keys of encrypted QUIC configs, by key file (read by the caller:
    // the reconciler does no I/O), and why the files that could not be read
    // were not. VIPs with encrypted configs are applied again when these
    // change; an encrypted config whose file has no key here is not applied
    // (its error says the reading's error, if given).
    void set_quic_keys(std::map<std::string, datapath::QuicKey> keys_by_file,
                       std::map<std::string, std::string> errors_by_file = {});
    // Installs the keys of every VIP whose id is known (restored from the
    // state file) into the data plane, before a restarted agent attaches a
    // program that has none; VIPs it cannot serve are left to plan().
    Result<void> install_quic_keys();
    // Removes the previous rings whose window has ended. A previous ring this
    // process did not publish (found pinned after a restart) gets a whole
    // window from the first call. The earliest end still to come, if any.
    std::optional<Clock::time_point> expire_previous_rings(Clock::time_point now);

    // Replaces the whole desired VIP set (start, SIGHUP). Only VIPs whose
    // spec changed are re-planned; the others keep their epoch.
    void set_vips(const std::vector<config::VipSpec>& vips);
    std::vector<config::VipSpec> vips() const;
    const config::VipSpec* find_vip(const std::string& key) const;

    // Epochs: a table can only take an epoch that the journal has recorded
    // as reserved (publish() writes the journal first when it must; with no
    // journal set nothing is reserved, for tests and tools). After a
    // restart, restore_epoch() with the record from the journal: the first
    // table of a VIP then keeps the recorded epoch only when that is proven
    // to be the live table (same ring in the data plane, the recorded
    // checksum, nothing reserved beyond the epoch: a clean stop, see
    // release_epoch_reservations()); otherwise it takes an epoch above
    // everything reserved, even when the live ring is adopted unchanged.
    void set_epoch_journal(EpochJournal journal) { epoch_journal_ = std::move(journal); }
    void restore_epoch(const std::string& vip_key, EpochRecord record);
    // A record with the epoch alone (an older state file): nothing proven.
    void restore_epoch(const std::string& vip_key, std::uint64_t epoch) {
        restore_epoch(vip_key, EpochRecord{epoch, std::nullopt, epoch});
    }
    // For the journal: every VIP that has an epoch or a reservation, and
    // the last record of every VIP key removed since (a key's epochs never
    // start again, whatever was deleted in between).
    std::map<std::string, EpochRecord> epoch_records() const;
    // Once nothing will be published any more (a clean stop, after the
    // control loop stopped): the reservations shrink to the epochs used, so
    // that the next start can prove its live tables are those epochs.
    void release_epoch_reservations();

    void set_observed(const std::string& vip_key, const net::IpAddress& backend,
                      ObservedBackend observed);

    // VIPs whose desired or observed state changed since they were planned,
    // or whose failed publish is due for another try at `now`.
    bool has_pending_work(Clock::time_point now) const;
    // When the earliest failed publish waiting out its back-off is due again
    // (nullopt: none waits), so that the caller can wake for it.
    std::optional<Clock::time_point> next_retry() const;

    // Plans every changed VIP. Liveness changes that need no new table are
    // applied at once; the rest come back as jobs to build.
    std::vector<BuildJob> plan(Clock::time_point now);
    // Publishes built tables in one batch, then applies what must follow a
    // publish. Results for a plan that has since changed are dropped. When
    // the data plane refuses (here or in plan()), the VIP is tried again
    // after a back-off from `now` (100 ms, doubling up to 5 s), or at once
    // when it changes again.
    Result<std::vector<PublishRecord>> publish(std::vector<BuildResult> results,
                                               Clock::time_point now);
    // plan + build here + publish: the synchronous path (tests, start-up).
    Result<std::vector<PublishRecord>> reconcile(Clock::time_point now);

    // Builds the table `next` (a changed spec of an existing VIP) would get
    // with the health observed now, and compares it with the table built for
    // the live inputs. Changes nothing. Error: unknown VIP, no live table
    // yet, or the builder's error.
    Result<TablePrediction> predict(const config::VipSpec& next) const;

    std::vector<VipStatus> status() const;
    std::optional<VipStatus> vip_status(const std::string& key) const;
    // True when every VIP's current desired state is live.
    bool all_published() const;
    // Panic changes decided by plan() since the last call, oldest first.
    std::vector<PanicChange> take_panic_changes();
    // Failures to apply a VIP since the last call, oldest first.
    std::vector<ApplyFailure> take_apply_failures();

private:
    // Hashed, not ordered: plan() looks up every backend of a changed VIP,
    // and a tree of thousands of addresses made that most of its cost.
    struct AddressHash {
        std::size_t operator()(const net::IpAddress& address) const noexcept;
    };
    template <class Value>
    using ByAddress = std::unordered_map<net::IpAddress, Value, AddressHash>;

    // A backend whose map entry this process has written (its id stays
    // allocated as long as it is here).
    struct AppliedBackend {
        std::uint32_t id = 0;             // its registry id, kept so plan() need not ask
        bool live = false;                // its flows may stay (the entry's generation is current)
        std::uint64_t kept_in_sweep = 0;  // see release_removed_backends()
    };
    // What plan() learnt of each spec backend in earlier plans, index-aligned
    // with spec.backends and trusted while the address at an index stays the
    // same: the address as text (its Maglev identity unless hash_key is set)
    // and, once its entry is written, its backend id. A plan of an unchanged
    // backend list then formats no address and looks up no backend, which at
    // thousands of backends was most of its cost.
    struct BackendMemo {
        std::vector<net::IpAddress> addresses;
        std::vector<std::string> address_texts;
        std::vector<std::optional<std::uint32_t>> ids;  // set: in `applied` under this id
    };
    // Of the latest plan, for status and the panic log.
    struct PanicVerdict {
        PanicReason panic = PanicReason::kNone;
        double healthy_share = 0;
    };

    // What set_quic() was given for a VIP.
    struct QuicEntries {
        std::vector<datapath::QuicConfigEntry> configs;
        std::vector<datapath::QuicServerEntry> servers;
        std::vector<datapath::QuicKeyEntry> keys;
        bool operator==(const QuicEntries&) const = default;
    };

    struct VipState {
        config::VipSpec spec;
        ByAddress<ObservedBackend> observed;
        bool starting = true;
        std::uint64_t plan_version = 1;     // bumped on every change
        std::uint64_t planned_version = 0;  // last version planned
        std::uint64_t live_version = 0;     // last version fully applied
        bool vip_entry_written = false;
        xlb_vip_value vip_value{};
        // The source-range entries written for the VIP (nullopt: none yet
        // by this process, whatever is pinned).
        std::optional<std::vector<datapath::SourceRangeEntry>> source_entries;
        // The QUIC routing written for the VIP (nullopt: none by this process).
        std::optional<QuicEntries> quic_entries;
        std::optional<PanicVerdict> current_panic;  // of the latest plan
        std::optional<VipPlan> table_plan;          // inputs of the live table
        std::uint32_t table_ring_size = 0;
        std::optional<VipPlan> pending_plan;  // being built
        ByAddress<AppliedBackend> applied;
        BackendMemo memo;
        std::uint64_t release_sweep = 0;  // last release_removed_backends() pass
        std::unordered_map<std::string, std::uint32_t> slots_by_identity;
        std::uint64_t epoch = 0;
        std::uint64_t checksum = 0;  // of the table live in this process
        // Epochs: `epoch` names the table `epoch_checksum` (nullopt: not
        // known, e.g. an older state file); epochs up to `epoch_floor` may
        // name tables a previous process published (restored reservation);
        // `epoch_reserved` goes into the next journal write, and the last
        // write that succeeded recorded `epoch_durable`.
        std::optional<std::uint64_t> epoch_checksum;
        std::uint64_t epoch_floor = 0;
        std::uint64_t epoch_reserved = 0;
        std::uint64_t epoch_durable = 0;
        std::string last_error;
        // Failed attempts in a row to apply this VIP (publish, map writes,
        // ids); the retry of the version that failed waits until retry_at
        // (a change of the VIP is tried at once).
        unsigned failed_attempts = 0;
        std::uint64_t failed_version = 0;
        Clock::time_point retry_at{};
        std::uint64_t panic_entries = 0;
        std::uint64_t applies_published = 0;
        std::uint64_t applies_failed = 0;
        // When the previous ring (second chance) goes: nullopt: not known
        // yet (set by the first expire_previous_rings); max(): there is none.
        std::optional<Clock::time_point> previous_until;
    };

    std::vector<ObservedBackend> observed_for(const VipState& v) const;
    static std::vector<ObservedBackend> observed_for(const config::VipSpec& spec,
                                                     const VipState& v);
    static void refresh_memo(VipState& v);
    // Also records every non-disabled backend's id in v.memo.
    Result<void> ensure_backend_entries(const std::string& vip_key, VipState& v);
    Result<void> apply_liveness(VipState& v, const VipPlan& plan);
    // Records the error and plans the VIP again after a back-off.
    void retry_later(VipState& v, Error error, Clock::time_point now);
    Result<void> release_removed_backends(VipState& v);
    Result<void> apply_vip_entry(VipState& v, std::uint32_t vip_id);
    // The keys of a VIP's encrypted configs, by slot; an error names the
    // config that cannot be served (no key, or no crypto in the kernel).
    Result<std::vector<datapath::QuicKeyEntry>> quic_keys(const config::VipSpec& spec,
                                                          std::uint32_t vip_id) const;
    static void record_slots(VipState& v, const BuildResult& r);
    Result<void> finish_apply(VipState& v, const VipPlan& plan, std::uint32_t vip_id);
    Result<void> remove_vip(const std::string& key, VipState& v);
    static std::uint64_t next_epoch(const VipState& v);
    static bool proven_live_epoch(const VipState& v, std::uint64_t checksum);
    static void apply_epoch_record(VipState& v, const EpochRecord& record);
    // Raises the reservation of every VIP with fewer than `low_water`
    // epochs left to next_epoch - 1 + kEpochReserve, then writes the
    // journal once (nothing when no VIP is that low or no journal is set).
    void reserve_epochs(std::uint64_t low_water);
    // What the publish of v's pending table does with its previous ring.
    PreviousRing previous_ring_for(const VipState& v) const;

    DataPlane& data_plane_;
    Options options_;
    IdRegistry registry_;
    std::map<std::string, VipState> vips_;
    std::map<std::string, VipState> removed_;  // waiting to be torn down
    // Epoch records of VIP keys not in vips_: restored from the journal, or
    // kept when a VIP is removed, so that a VIP added again continues above
    // every epoch its key ever had (an epoch names one table of a key, for
    // good), also across restarts (epoch_records() journals them).
    std::map<std::string, EpochRecord> known_epochs_;
    std::map<std::string, datapath::QuicKey> quic_keys_;  // by key file
    std::map<std::string, std::string> quic_key_errors_;  // by key file
    EpochJournal epoch_journal_;
    std::vector<PanicChange> panic_changes_;
    std::vector<ApplyFailure> apply_failures_;
};

}  // namespace xlb::control
