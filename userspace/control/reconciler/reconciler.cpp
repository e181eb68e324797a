// SPDX-License-Identifier: Apache-2.0
#include "xlb/control/reconciler.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>

#include "xlb/datapath/setup.h"

namespace xlb::control {
namespace {

// Bound on the panic changes and apply failures kept for a caller.
constexpr std::size_t kMaxKeptEvents = 1024;

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

// The backends' addresses, the disabled ones included or not.
std::set<net::IpAddress> addresses_of(const config::VipSpec& spec, bool with_disabled) {
    std::set<net::IpAddress> out;
    for (const config::BackendSpec& b : spec.backends)
        if (with_disabled || b.state != config::AdminState::kDisabled) out.insert(b.address);
    return out;
}

bool same_observation(const ObservedBackend& a, const ObservedBackend& b) {
    return a.health == b.health && a.weight_factor == b.weight_factor;
}

}  // namespace

BuildResult build_table(const BuildJob& job) {
    BuildResult out;
    out.vip_key = job.vip_key;
    out.plan_version = job.plan_version;
    out.decided_at = job.decided_at;
    maglev::BuildOptions options;
    options.ring_size = job.ring_size;
    auto table = maglev::build_table(job.members, options);
    if (!table) {
        out.error = make_error(0, table.error().message);
        return out;
    }
    out.checksum = table->checksum;
    out.slots = std::move(table->slots_per_backend);
    // Member index -> backend id in place: no second ring-sized buffer to
    // allocate and clear per build.
    out.ring = std::move(table->table);
    for (std::uint32_t& slot : out.ring) slot = job.member_ids[slot];
    return out;
}

std::size_t Reconciler::AddressHash::operator()(const net::IpAddress& address) const noexcept {
    // The 16 bytes and the family are the whole value operator== compares
    // (IPv4 zero-fills the last 12). Two multiply-xorshift rounds instead of
    // a byte-wise hash: this runs for every backend of every plan.
    std::uint64_t high, low;
    std::memcpy(&high, address.bytes.data(), 8);
    std::memcpy(&low, address.bytes.data() + 8, 8);
    std::uint64_t h = (high ^ address.family) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 32) ^ low) * 0xd6e8feb86659fd93ull;
    return static_cast<std::size_t>(h ^ (h >> 32));
}

Reconciler::Reconciler(DataPlane& data_plane, Options options)
    : data_plane_(data_plane),
      options_(options),
      registry_(options.max_vips, options.max_backends) {}

void Reconciler::set_vips(const std::vector<config::VipSpec>& vips) {
    std::map<std::string, const config::VipSpec*> wanted;
    for (const config::VipSpec& spec : vips) wanted.emplace(spec.key(), &spec);

    for (auto it = vips_.begin(); it != vips_.end();) {
        if (!wanted.contains(it->first)) {
            removed_.insert_or_assign(it->first, std::move(it->second));
            it = vips_.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [key, spec] : wanted) {
        auto it = vips_.find(key);
        if (it == vips_.end()) {
            // A VIP re-added before its removal was carried out simply continues.
            VipState state;
            if (auto old = removed_.find(key); old != removed_.end()) {
                state = std::move(old->second);
                removed_.erase(old);
            }
            state.spec = *spec;
            state.plan_version += 1;
            if (auto e = known_epochs_.find(key); e != known_epochs_.end())
                apply_epoch_record(state, e->second);
            vips_.emplace(key, std::move(state));
            continue;
        }
        if (it->second.spec == *spec) continue;
        // A VIP whose check changes (e.g. from none) may have backends without
        // a verdict again: it uses all of them until they have one, as at start.
        if (it->second.spec.health_check.type != spec->health_check.type)
            it->second.starting = true;
        it->second.spec = *spec;
        it->second.plan_version += 1;
        // observations of backends that are gone are forgotten
        auto& observed = it->second.observed;
        if (observed.empty()) continue;
        const std::set<net::IpAddress> present = addresses_of(*spec, /*with_disabled=*/true);
        for (auto o = observed.begin(); o != observed.end();)
            o = present.contains(o->first) ? std::next(o) : observed.erase(o);
    }
}

std::vector<config::VipSpec> Reconciler::vips() const {
    std::vector<config::VipSpec> out;
    for (const auto& [key, v] : vips_) out.push_back(v.spec);
    return out;
}

const config::VipSpec* Reconciler::find_vip(const std::string& key) const {
    auto it = vips_.find(key);
    return it == vips_.end() ? nullptr : &it->second.spec;
}

void Reconciler::apply_epoch_record(VipState& v, const EpochRecord& record) {
    // only ever forwards: a record older than what this process knows changes nothing
    if (record.epoch > v.epoch) {
        v.epoch = record.epoch;
        v.epoch_checksum = record.checksum;
    } else if (record.epoch == v.epoch && !v.epoch_checksum) {
        v.epoch_checksum = record.checksum;
    }
    const std::uint64_t reserved = std::max(record.reserved, record.epoch);
    v.epoch_floor = std::max(v.epoch_floor, reserved);
    v.epoch_reserved = std::max(v.epoch_reserved, reserved);
    v.epoch_durable = std::max(v.epoch_durable, reserved);  // it came from the journal
}

void Reconciler::restore_epoch(const std::string& vip_key, EpochRecord record) {
    known_epochs_[vip_key] = record;
    if (auto it = vips_.find(vip_key); it != vips_.end()) apply_epoch_record(it->second, record);
}

std::map<std::string, EpochRecord> Reconciler::epoch_records() const {
    std::map<std::string, EpochRecord> out;
    for (const auto& [key, record] : known_epochs_)
        if (!vips_.contains(key)) out[key] = record;
    for (const auto& [key, v] : vips_) {
        const std::uint64_t reserved = std::max({v.epoch, v.epoch_floor, v.epoch_reserved});
        if (reserved == 0) continue;
        out[key] = EpochRecord{v.epoch, v.epoch_checksum, reserved};
    }
    return out;
}

void Reconciler::release_epoch_reservations() {
    for (auto& [key, v] : vips_) {
        // a floor above the epoch stays: this process never proved which
        // of those epochs its table is (it has published none)
        v.epoch_reserved = std::max(v.epoch, v.epoch_floor);
        v.epoch_durable = std::min(v.epoch_durable, v.epoch_reserved);
    }
}

std::uint64_t Reconciler::next_epoch(const VipState& v) {
    return std::max(v.epoch, v.epoch_floor) + 1;
}

bool Reconciler::proven_live_epoch(const VipState& v, std::uint64_t checksum) {
    // The live ring equals the built one (the caller checked). Its epoch is
    // the recorded one when that epoch named this checksum and no later
    // epoch was reserved, so none can have named another table since.
    return v.epoch > 0 && v.epoch_checksum == checksum && v.epoch_floor <= v.epoch;
}

void Reconciler::reserve_epochs(std::uint64_t low_water) {
    if (!epoch_journal_) return;
    bool raised = false;
    for (auto& [key, v] : vips_) {
        const std::uint64_t used = next_epoch(v) - 1;
        if (v.epoch_durable >= used + low_water) continue;
        v.epoch_reserved = std::max(v.epoch_reserved, used + kEpochReserve);
        raised = true;
    }
    if (!raised) return;
    // A failed write does not hold the tables back (a full disk must not
    // stop failover): the journal reports it, and the next publish tries again.
    if (!epoch_journal_(*this)) return;
    for (auto& [key, v] : vips_) v.epoch_durable = std::max(v.epoch_durable, v.epoch_reserved);
}

void Reconciler::set_observed(const std::string& vip_key, const net::IpAddress& backend,
                              ObservedBackend observed) {
    auto it = vips_.find(vip_key);
    if (it == vips_.end() || !it->second.spec.find_backend(backend)) return;
    auto& slot = it->second.observed[backend];
    if (same_observation(slot, observed)) {
        slot.local_health = observed.local_health;  // shown only: no new plan
        return;
    }
    slot = observed;
    it->second.plan_version += 1;
}

namespace {

// A VIP whose last attempt failed and that has not changed since waits.
bool waits_for_retry(std::uint64_t plan_version, std::uint64_t failed_version,
                     Clock::time_point retry_at, Clock::time_point now) {
    return plan_version == failed_version && now < retry_at;
}

Clock::duration retry_delay(unsigned failures) {
    constexpr auto kFirst = std::chrono::milliseconds(100);
    constexpr auto kMax = std::chrono::milliseconds(5000);
    const unsigned doublings = std::min(failures == 0 ? 0U : failures - 1, 6U);
    return std::min<Clock::duration>(kFirst * (1U << doublings), kMax);
}

}  // namespace

bool Reconciler::has_pending_work(Clock::time_point now) const {
    if (!removed_.empty()) return true;
    return std::any_of(vips_.begin(), vips_.end(), [now](const auto& kv) {
        const VipState& v = kv.second;
        return v.planned_version != v.plan_version &&
               !waits_for_retry(v.plan_version, v.failed_version, v.retry_at, now);
    });
}

std::optional<Clock::time_point> Reconciler::next_retry() const {
    std::optional<Clock::time_point> next;
    for (const auto& [key, v] : vips_) {
        if (v.failed_attempts == 0 || v.planned_version == v.plan_version ||
            v.plan_version != v.failed_version)
            continue;
        if (!next || v.retry_at < *next) next = v.retry_at;
    }
    return next;
}

std::vector<ObservedBackend> Reconciler::observed_for(const VipState& v) const {
    return observed_for(v.spec, v);
}

std::vector<ObservedBackend> Reconciler::observed_for(const config::VipSpec& spec,
                                                      const VipState& v) {
    std::vector<ObservedBackend> out;
    out.reserve(spec.backends.size());
    const bool checked = spec.health_check.type != config::HealthCheckType::kNone;
    for (const config::BackendSpec& b : spec.backends) {
        ObservedBackend o;
        if (!v.observed.empty())
            if (auto it = v.observed.find(b.address); it != v.observed.end()) o = it->second;
        if (!checked) o.health = o.local_health = Health::kHealthy;
        out.push_back(o);
    }
    return out;
}

void Reconciler::refresh_memo(VipState& v) {
    BackendMemo& memo = v.memo;
    const std::size_t n = v.spec.backends.size();
    memo.addresses.resize(n);
    memo.address_texts.resize(n);
    memo.ids.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const net::IpAddress& address = v.spec.backends[i].address;
        // an empty text: a slot new to the memo (no address prints as "")
        if (!memo.address_texts[i].empty() && memo.addresses[i] == address) continue;
        memo.addresses[i] = address;
        memo.address_texts[i] = address.to_string();
        memo.ids[i].reset();
    }
}

Result<void> Reconciler::ensure_backend_entries(const std::string& vip_key, VipState& v) {
    for (std::size_t i = 0; i < v.spec.backends.size(); ++i) {
        const config::BackendSpec& b = v.spec.backends[i];
        if (b.state == config::AdminState::kDisabled) continue;
        // applied: it has an id and a current entry already
        if (v.memo.ids[i]) continue;
        if (auto applied = v.applied.find(b.address); applied != v.applied.end()) {
            v.memo.ids[i] = applied->second.id;
            continue;
        }
        auto ref = registry_.backend(vip_key, b.address);
        if (!ref) return std::unexpected(std::move(ref.error()));
        // first sight in this process: (re)write the entry; a restored
        // assignment writes the same id and generation the map already holds
        auto ok =
            data_plane_.put_backend(ref->id, datapath::backend_entry(b.address, ref->generation));
        if (!ok) return ok;
        v.applied[b.address] = AppliedBackend{ref->id, true};
        v.memo.ids[i] = ref->id;
    }
    return {};
}

Result<void> Reconciler::apply_liveness(VipState& v, const VipPlan& plan) {
    const std::string key = v.spec.key();
    for (const PlannedBackend& p : plan.backends) {
        const config::BackendSpec& b = v.spec.backends[p.spec_index];
        if (b.state == config::AdminState::kDisabled) continue;
        auto applied = v.applied.find(b.address);
        if (applied == v.applied.end()) continue;
        if (applied->second.live && !p.live) {
            // its recorded flows must re-pick from the (already live) new
            // ring, and no second-chance hint sends a flow to it
            BackendRef ref = registry_.bump_generation(key, b.address);
            auto ok = data_plane_.put_backend(
                ref.id, datapath::backend_entry(b.address, ref.generation, true));
            if (!ok) return ok;
        } else if (!applied->second.live && p.live) {
            auto ref = registry_.find_backend(key, b.address);
            if (ref) {
                auto ok = data_plane_.put_backend(
                    ref->id, datapath::backend_entry(b.address, ref->generation));
                if (!ok) return ok;
            }
        }
        applied->second.live = p.live;
    }
    return {};
}

Result<void> Reconciler::release_removed_backends(VipState& v) {
    // This runs after every publish: first a cheap check that every applied
    // backend is still wanted (usually so), with no set built and no
    // find_backend() per entry (a linear search made it quadratic: seconds
    // at N = 10,000). Entries are marked, not counted per spec backend, so a
    // spec naming an address twice cannot hide one that is gone.
    const std::uint64_t sweep = ++v.release_sweep;
    std::size_t kept_applied = 0;
    for (const config::BackendSpec& b : v.spec.backends) {
        if (b.state == config::AdminState::kDisabled) continue;
        auto applied = v.applied.find(b.address);
        if (applied == v.applied.end() || applied->second.kept_in_sweep == sweep) continue;
        applied->second.kept_in_sweep = sweep;
        ++kept_applied;
    }
    if (kept_applied == v.applied.size()) return {};

    const std::string key = v.spec.key();
    const std::set<net::IpAddress> kept = addresses_of(v.spec, /*with_disabled=*/false);
    // in address order, so the entries are written in the same order on
    // every run (the map is unordered)
    std::vector<net::IpAddress> gone;
    for (const auto& [address, applied] : v.applied)
        if (!kept.contains(address)) gone.push_back(address);
    std::sort(gone.begin(), gone.end());
    // the memo's ids stand for entries in `applied`: forget them all (rare)
    if (!gone.empty()) v.memo = {};
    for (const net::IpAddress& address : gone) {
        if (auto released = registry_.release_backend(key, address)) {
            auto ok = data_plane_.put_backend(
                released->id, datapath::released_backend_entry(released->generation));
            if (!ok) return ok;
        }
        v.applied.erase(address);
    }
    return {};
}

Result<void> Reconciler::remove_vip(const std::string& key, VipState& v) {
    auto vip_id = registry_.find_vip(key);
    if (v.vip_entry_written) {
        // packets for the address go to the kernel from here on
        auto ok = data_plane_.remove_vip(datapath::vip_key(v.spec));
        if (!ok) return ok;
        v.vip_entry_written = false;
    }
    if (vip_id) {
        auto ok = data_plane_.remove_ring(*vip_id);
        if (!ok) return ok;
        // The id may go to another VIP: none of these entries may be its.
        if (v.source_entries && !v.source_entries->empty()) {
            if (auto gone = data_plane_.remove_source_ranges(*vip_id); !gone) return gone;
        }
        v.source_entries.reset();
        // before its backends' ids are released: no server id may name one
        // that another backend gets
        if (v.quic_entries) {
            if (auto gone = data_plane_.remove_quic(*vip_id); !gone) return gone;
        }
        v.quic_entries.reset();
    }
    v.spec.backends.clear();
    auto ok = release_removed_backends(v);
    if (!ok) return ok;
    registry_.release_vip(key);
    return {};
}

// The source lists and the VIP entry, in the order that never lets a packet
// see the flag without its entries: new entries go in before the flag does,
// and the flag goes before the entries are removed.
Result<void> Reconciler::apply_vip_entry(VipState& v, std::uint32_t vip_id) {
    const xlb_vip_value value = datapath::vip_value(v.spec, vip_id, options_.encap);
    const xlb_vip_key key = datapath::vip_key(v.spec);
    std::vector<datapath::SourceRangeEntry> entries =
        datapath::source_range_entries(v.spec, vip_id);
    const bool ranges_changed = v.source_entries != entries;
    const bool with_ranges = !entries.empty();
    auto write_ranges = [&]() -> Result<void> {
        if (!ranges_changed) return {};
        auto ok = with_ranges ? data_plane_.set_source_ranges(key, vip_id, entries)
                              : data_plane_.remove_source_ranges(vip_id);
        if (!ok) return ok;
        v.source_entries = std::move(entries);
        return {};
    };
    // QUIC routing likewise: configs, their keys and server entries before
    // the flag; the flag off before they go. The server entries follow the
    // backends' ids, and are written here, before release_removed_backends()
    // frees the ids of backends that are gone.
    const bool with_quic = (value.flags & XLB_VIP_F_QUIC) != 0;
    std::optional<QuicEntries> quic;
    if (with_quic) {
        auto keys = quic_keys(v.spec, vip_id);
        if (!keys) return std::unexpected(std::move(keys.error()));
        quic = QuicEntries{datapath::quic_config_entries(v.spec, vip_id),
                           datapath::quic_server_entries(v.spec, vip_id, v.memo.ids),
                           std::move(*keys)};
    }
    auto write_quic = [&]() -> Result<void> {
        if (quic == v.quic_entries) return {};
        auto ok = quic ? data_plane_.set_quic(vip_id, quic->configs, quic->servers, quic->keys)
                       : data_plane_.remove_quic(vip_id);
        if (!ok) return ok;
        v.quic_entries = std::move(quic);
        return {};
    };
    if (with_ranges)
        if (auto ok = write_ranges(); !ok) return ok;
    if (with_quic)
        if (auto ok = write_quic(); !ok) return ok;
    if (!v.vip_entry_written || v.vip_value.vip_id != value.vip_id ||
        v.vip_value.flags != value.flags) {
        auto ok = data_plane_.put_vip(key, value);
        if (!ok) return ok;
        v.vip_entry_written = true;
        v.vip_value = value;
    }
    if (!with_quic)
        if (auto ok = write_quic(); !ok) return ok;
    if (!with_ranges) return write_ranges();
    return {};
}

Result<std::vector<datapath::QuicKeyEntry>> Reconciler::quic_keys(const config::VipSpec& spec,
                                                                  std::uint32_t vip_id) const {
    std::vector<datapath::QuicKeyEntry> keys;
    if ((datapath::vip_flags(spec) & XLB_VIP_F_QUIC) == 0) return keys;
    for (const config::QuicConfig& q : spec.quic) {
        if (q.mode != config::QuicMode::kEncrypted || q.config_id >= XLB_QUIC_CONFIG_IDS) continue;
        // Never served as plaintext or by the ring alone: refused.
        if (!data_plane_.quic_crypto_available())
            return fail("VIP " + spec.key() + ": quic config " + std::to_string(q.config_id) +
                        " is encrypted, but this kernel has no BPF crypto kfuncs "
                        "(bpf_crypto_decrypt; Linux >= 6.10)");
        auto key = quic_keys_.find(q.key_file);
        if (key == quic_keys_.end()) {
            const std::string config =
                "VIP " + spec.key() + ": quic config " + std::to_string(q.config_id) + ": ";
            if (auto why = quic_key_errors_.find(q.key_file); why != quic_key_errors_.end())
                return fail(config + why->second);
            return fail(config + "no key read from " +
                        (q.key_file.empty() ? "(no key_file)" : q.key_file));
        }
        keys.push_back({datapath::quic_slot(vip_id, q.config_id), key->second});
    }
    std::sort(keys.begin(), keys.end(),
              [](const datapath::QuicKeyEntry& a, const datapath::QuicKeyEntry& b) {
                  return a.slot < b.slot;
              });
    return keys;
}

void Reconciler::set_quic_keys(std::map<std::string, datapath::QuicKey> keys_by_file,
                               std::map<std::string, std::string> errors_by_file) {
    if (keys_by_file == quic_keys_ && errors_by_file == quic_key_errors_) return;
    quic_keys_ = std::move(keys_by_file);
    quic_key_errors_ = std::move(errors_by_file);
    // VIPs with encrypted configs write their keys again (changed or not:
    // set_quic installs only what differs from what it wrote)
    for (auto& [key, v] : vips_)
        if (std::any_of(v.spec.quic.begin(), v.spec.quic.end(), [](const config::QuicConfig& q) {
                return q.mode == config::QuicMode::kEncrypted;
            }))
            v.plan_version += 1;
}

Result<void> Reconciler::install_quic_keys() {
    std::vector<datapath::QuicKeyEntry> all;
    for (const auto& [key, v] : vips_) {
        auto vip_id = registry_.find_vip(key);
        if (!vip_id) continue;
        auto keys = quic_keys(v.spec, *vip_id);
        if (!keys) continue;  // plan() reports it, and refuses the VIP
        all.insert(all.end(), keys->begin(), keys->end());
    }
    if (all.empty()) return {};
    return data_plane_.install_quic_keys(all);
}

// What follows a VIP's table going live (or a change that needs no table).
Result<void> Reconciler::finish_apply(VipState& v, const VipPlan& plan, std::uint32_t vip_id) {
    if (auto ok = apply_vip_entry(v, vip_id); !ok) return ok;
    if (auto ok = apply_liveness(v, plan); !ok) return ok;
    if (auto ok = release_removed_backends(v); !ok) return ok;
    v.live_version = v.plan_version;
    v.last_error.clear();
    v.failed_attempts = 0;
    return {};
}

void Reconciler::retry_later(VipState& v, Error error, Clock::time_point now) {
    const Clock::duration delay = retry_delay(++v.failed_attempts);
    ++v.applies_failed;
    v.planned_version = 0;  // plan (and try) again, after the back-off
    v.failed_version = v.plan_version;
    v.retry_at = now + delay;
    // bounded: a caller that never takes them must not grow it forever
    if (apply_failures_.size() >= kMaxKeptEvents) apply_failures_.erase(apply_failures_.begin());
    v.last_error = error.message();
    apply_failures_.push_back({v.spec.key(), std::move(error), delay});
}

std::vector<BuildJob> Reconciler::plan(Clock::time_point now) {
    for (auto it = removed_.begin(); it != removed_.end();) {
        auto ok = remove_vip(it->first, it->second);
        if (!ok) {
            it->second.last_error = ok.error().message();
            ++it;
            continue;
        }
        // Its table is gone, not its epochs: a VIP added again continues
        // above all of them (no checksum: no table of it is live).
        const VipState& gone = it->second;
        const std::uint64_t used = std::max(gone.epoch, gone.epoch_floor);
        known_epochs_[it->first] =
            EpochRecord{used, std::nullopt, std::max(used, gone.epoch_reserved)};
        it = removed_.erase(it);
    }

    std::vector<BuildJob> jobs;
    for (auto& [key, v] : vips_) {
        if (v.planned_version == v.plan_version) continue;
        if (waits_for_retry(v.plan_version, v.failed_version, v.retry_at, now)) continue;
        v.planned_version = v.plan_version;
        const std::vector<ObservedBackend> observed = observed_for(v);
        refresh_memo(v);
        VipPlan plan = plan_vip(v.spec, observed, v.starting, v.memo.address_texts);
        if (v.starting) {
            bool all_judged = true;
            for (std::size_t i = 0; i < v.spec.backends.size(); ++i)
                if (v.spec.backends[i].state == config::AdminState::kActive &&
                    observed[i].health == Health::kUnknown)
                    all_judged = false;
            v.starting = !all_judged;
        }
        const PanicReason before = v.current_panic ? v.current_panic->panic : PanicReason::kNone;
        if (plan.panic != before) {
            if (plan.panic == PanicReason::kBelowThreshold) ++v.panic_entries;
            // bounded: a caller that never takes them must not grow it forever
            if (panic_changes_.size() >= kMaxKeptEvents)
                panic_changes_.erase(panic_changes_.begin());
            panic_changes_.push_back(
                {key, before, plan.panic, plan.healthy_share, v.spec.panic_threshold});
        }
        v.current_panic = PanicVerdict{plan.panic, plan.healthy_share};

        auto vip_id = registry_.vip_id(key);
        if (!vip_id) {
            // e.g. every VIP id taken: one may be freed by a removal
            retry_later(v, std::move(vip_id.error()), now);
            continue;
        }
        if (auto ok = ensure_backend_entries(key, v); !ok) {
            retry_later(v, std::move(ok.error()), now);
            continue;
        }
        // A VIP whose QUIC configs cannot be served is refused before its
        // table is built (its entry, if any, keeps what it had).
        if (auto keys = quic_keys(v.spec, *vip_id); !keys) {
            retry_later(v, std::move(keys.error()), now);
            continue;
        }
        const bool needs_table = !v.table_plan || !plan.same_table_inputs(*v.table_plan) ||
                                 v.table_ring_size != v.spec.ring_size;
        if (!needs_table) {
            if (auto ok = finish_apply(v, plan, *vip_id); !ok)
                retry_later(v, std::move(ok.error()), now);
            continue;
        }
        BuildJob job;
        job.vip_key = key;
        job.plan_version = v.plan_version;
        job.ring_size = v.spec.ring_size;
        job.decided_at = now;
        job.members.reserve(plan.backends.size());
        job.member_ids.reserve(plan.backends.size());
        for (const PlannedBackend& p : plan.backends) {
            if (!p.in_table) continue;
            job.members.push_back({p.identity, p.effective_weight});
            job.member_ids.push_back(*v.memo.ids[p.spec_index]);
        }
        v.pending_plan = std::move(plan);
        jobs.push_back(std::move(job));
    }
    return jobs;
}

void Reconciler::record_slots(VipState& v, const BuildResult& r) {
    v.slots_by_identity.clear();
    std::size_t member = 0;
    for (const PlannedBackend& p : v.pending_plan->backends)
        if (p.in_table && member < r.slots.size())
            v.slots_by_identity[p.identity] = r.slots[member++];
}

Result<std::vector<PublishRecord>> Reconciler::publish(std::vector<BuildResult> results,
                                                       Clock::time_point now) {
    std::vector<RingUpdate> rings;
    std::vector<BuildResult*> accepted, adopted;
    for (BuildResult& r : results) {
        auto it = vips_.find(r.vip_key);
        // a newer plan supersedes this build; it is already queued or built
        if (it == vips_.end() || r.plan_version != it->second.plan_version) continue;
        if (r.error) {
            it->second.last_error = r.error->message();
            continue;
        }
        auto vip_id = registry_.find_vip(r.vip_key);
        if (!vip_id) continue;
        VipState& v = it->second;
        if (!v.table_plan) {
            // First table of this process: after a restart the pinned ring may
            // already be exactly this one. Adopt it: no swap, and its recorded
            // epoch when that is proven to be this table (proven_live_epoch).
            auto live = data_plane_.live_ring(*vip_id);
            if (live && *live && **live == r.ring && (v.epoch > 0 || v.epoch_floor > 0)) {
                adopted.push_back(&r);
                continue;
            }
        }
        rings.push_back({*vip_id, std::move(r.ring), previous_ring_for(v)});
        accepted.push_back(&r);
    }
    std::vector<PublishRecord> records;
    Result<void> first_error;
    // Write-ahead: every epoch these tables may take is recorded as reserved
    // before any of them goes live or is named (only a VIP out of reserved
    // epochs writes here; reserve_epochs() below keeps them ahead).
    if (!adopted.empty() || !rings.empty()) reserve_epochs(1);
    // The VIP now has the table of r (its epoch already set): record it and
    // finish the plan's other writes.
    auto install_table = [&](VipState& v, const BuildResult& r) {
        v.epoch_checksum = r.checksum;
        v.checksum = r.checksum;
        v.table_plan = v.pending_plan;
        v.table_ring_size = v.spec.ring_size;
        record_slots(v, r);
        auto ok = finish_apply(v, *v.pending_plan, *registry_.find_vip(r.vip_key));
        if (!ok) {
            if (first_error) first_error = ok;
            retry_later(v, std::move(ok.error()), now);
        }
    };
    for (BuildResult* r : adopted) {
        VipState& v = vips_.at(r->vip_key);
        if (!proven_live_epoch(v, r->checksum)) v.epoch = next_epoch(v);
        ++v.applies_published;
        install_table(v, *r);
    }
    if (rings.empty()) {
        reserve_epochs(kEpochReserve / 2);
        if (!first_error) return std::unexpected(first_error.error());
        return records;
    }

    auto timing = data_plane_.publish(rings);
    if (!timing) {
        // no epoch was taken (none was named): the retry takes the same one
        for (BuildResult* r : accepted) retry_later(vips_.at(r->vip_key), timing.error(), now);
        return std::unexpected(timing.error());
    }

    for (std::size_t i = 0; i < accepted.size(); ++i) {
        BuildResult* r = accepted[i];
        VipState& v = vips_.at(r->vip_key);
        switch (rings[i].previous) {
            case PreviousRing::kLiveRing:
                v.previous_until = now + *options_.second_chance_window;
                break;
            case PreviousRing::kNone: v.previous_until = Clock::time_point::max(); break;
            case PreviousRing::kUnchanged:
                break;  // the window of the last change of members goes on
        }
        v.epoch = next_epoch(v);
        ++v.applies_published;
        install_table(v, *r);
        records.push_back({r->vip_key, v.epoch, v.checksum,
                           ms_between(r->decided_at, timing->issued),
                           ms_between(r->decided_at, timing->returned)});
    }
    // The tables are live and timed: now (off the decision-to-live path)
    // top up the VIPs whose reserve runs low, so the next publishes find
    // theirs already written.
    reserve_epochs(kEpochReserve / 2);
    if (!first_error) return std::unexpected(first_error.error());
    return records;
}

PreviousRing Reconciler::previous_ring_for(const VipState& v) const {
    if (!options_.second_chance_window) return PreviousRing::kNone;
    // Only a change of the table's members moves flows between backends;
    // weight-only steps (slow start, a weight) keep the ring from before the
    // last such change, so that second chance still finds where a flow began
    // however many steps were published since.
    const bool weight_only = v.table_plan && v.pending_plan &&
                             v.table_ring_size == v.spec.ring_size &&
                             v.pending_plan->same_table_members(*v.table_plan);
    return weight_only ? PreviousRing::kUnchanged : PreviousRing::kLiveRing;
}

void Reconciler::set_encap(config::Encap encap) {
    if (options_.encap == encap) return;
    options_.encap = encap;
    for (auto& [key, v] : vips_) v.plan_version += 1;
}

void Reconciler::set_second_chance(std::optional<Clock::duration> window) {
    options_.second_chance_window = window;
    // Off: every previous ring goes now. On, or a new window: rings kept
    // under the old window keep their end (at most one window late).
    if (!window)
        for (auto& [key, v] : vips_)
            if (v.previous_until != Clock::time_point::max())
                v.previous_until = Clock::time_point::min();
}

std::optional<Clock::time_point> Reconciler::expire_previous_rings(Clock::time_point now) {
    std::optional<Clock::time_point> next;
    for (auto& [key, v] : vips_) {
        if (!v.previous_until)
            v.previous_until = options_.second_chance_window ? now + *options_.second_chance_window
                                                             : Clock::time_point::min();
        if (*v.previous_until == Clock::time_point::max()) continue;
        if (*v.previous_until > now) {
            next = next ? std::min(*next, *v.previous_until) : *v.previous_until;
            continue;
        }
        // no id yet (not planned since the start): the next call
        auto vip_id = registry_.find_vip(key);
        if (!vip_id) continue;
        // a failure is tried again at the next call
        if (auto ok = data_plane_.remove_previous_ring(*vip_id); !ok) {
            apply_failures_.push_back({key, ok.error(), {}});
            continue;
        }
        v.previous_until = Clock::time_point::max();
    }
    return next;
}

Result<std::vector<PublishRecord>> Reconciler::reconcile(Clock::time_point now) {
    std::vector<BuildJob> jobs = plan(now);
    std::vector<BuildResult> results;
    results.reserve(jobs.size());
    for (const BuildJob& job : jobs) results.push_back(build_table(job));
    return publish(std::move(results), now);
}

std::vector<VipStatus> Reconciler::status() const {
    std::vector<VipStatus> out;
    for (const auto& [key, v] : vips_) out.push_back(*vip_status(key));
    return out;
}

namespace {

// The Maglev table of a plan's in-table backends: the owner's address per
// slot, or nullopt for an empty table.
// Owners are found by identity, not by the plan's spec_index: the live
// table's plan may predate edits that shifted the spec's backends.
using AddressOfIdentity = std::map<std::string, net::IpAddress>;

Result<std::vector<std::optional<net::IpAddress>>> owners_of(const AddressOfIdentity& address_of,
                                                             const VipPlan& plan,
                                                             std::uint32_t ring_size,
                                                             std::uint64_t* checksum) {
    std::vector<maglev::Backend> members;
    std::vector<net::IpAddress> addresses;
    for (const PlannedBackend& p : plan.backends) {
        if (!p.in_table) continue;
        auto address = address_of.find(p.identity);
        if (address == address_of.end()) return fail("no backend with identity " + p.identity);
        members.push_back({p.identity, p.effective_weight});
        addresses.push_back(address->second);
    }
    maglev::BuildOptions options;
    options.ring_size = ring_size;
    auto table = maglev::build_table(members, options);
    if (!table) return fail(table.error().message);
    if (checksum) *checksum = table->checksum;
    std::vector<std::optional<net::IpAddress>> owners(ring_size);
    if (table->table.empty()) return owners;  // every slot without a backend
    for (std::uint32_t slot = 0; slot < ring_size; ++slot)
        owners[slot] = addresses[table->table[slot]];
    return owners;
}

}  // namespace

Result<TablePrediction> Reconciler::predict(const config::VipSpec& next) const {
    const std::string key = next.key();
    auto it = vips_.find(key);
    if (it == vips_.end()) return fail("no VIP " + key);
    const VipState& v = it->second;
    if (!v.table_plan) return fail("VIP " + key + " has no live table yet");

    // The live table, rebuilt from the inputs it was built from: the builder
    // is deterministic, so this is the table in the data plane.
    AddressOfIdentity address_of;
    for (const config::BackendSpec& b : v.spec.backends) address_of[b.identity()] = b.address;
    for (const config::BackendSpec& b : next.backends) address_of[b.identity()] = b.address;
    auto before = owners_of(address_of, *v.table_plan, v.table_ring_size, nullptr);
    if (!before)
        return std::unexpected(std::move(before.error()).add_context("rebuild the live table"));
    // The next one, planned as plan() would plan it with what is observed now.
    const VipPlan next_plan = plan_vip(next, observed_for(next, v), v.starting);
    TablePrediction out;
    out.epoch = v.epoch;
    out.ring_size = next.ring_size;
    auto after = owners_of(address_of, next_plan, next.ring_size, &out.checksum);
    if (!after) return std::unexpected(after.error());

    std::map<net::IpAddress, TablePrediction::Backend> per_backend;
    for (const config::BackendSpec& b : v.spec.backends) per_backend[b.address].address = b.address;
    for (const config::BackendSpec& b : next.backends) per_backend[b.address].address = b.address;
    for (const auto& owner : *before)
        if (owner) per_backend[*owner].slots_before += 1;
    for (const auto& owner : *after)
        if (owner) per_backend[*owner].slots_after += 1;
    if (before->size() == after->size()) {
        for (std::size_t slot = 0; slot < after->size(); ++slot)
            out.slots_moved += (*before)[slot] != (*after)[slot];
    } else {
        // a new ring size re-deals every slot
        out.slots_moved = out.ring_size;
    }
    for (auto& [address, b] : per_backend) out.backends.push_back(b);
    return out;
}

std::optional<VipStatus> Reconciler::vip_status(const std::string& key) const {
    auto it = vips_.find(key);
    if (it == vips_.end()) return std::nullopt;
    const VipState& v = it->second;
    VipStatus s;
    s.spec = v.spec;
    s.vip_id = registry_.find_vip(key);
    s.epoch = v.epoch;
    s.checksum = v.checksum;
    s.published = v.live_version == v.plan_version && v.last_error.empty();
    s.last_error = v.last_error;
    s.starting = v.starting;
    s.panic_entries = v.panic_entries;
    s.applies_published = v.applies_published;
    s.applies_failed = v.applies_failed;
    if (v.current_panic) {
        s.panic = v.current_panic->panic;
        s.healthy_share = v.current_panic->healthy_share;
    }
    const std::vector<ObservedBackend> observed = observed_for(v);
    // the live table's members by identity: one pass, not one per backend
    std::unordered_map<std::string_view, std::uint32_t> table_weight_by_identity;
    if (v.table_plan)
        for (const PlannedBackend& p : v.table_plan->backends)
            if (p.in_table) table_weight_by_identity.emplace(p.identity, p.effective_weight);
    for (std::size_t i = 0; i < v.spec.backends.size(); ++i) {
        const config::BackendSpec& b = v.spec.backends[i];
        const std::string identity = b.identity();
        BackendStatus bs;
        bs.address = b.address;
        bs.state = b.state;
        bs.health = observed[i].health;
        bs.local_health = observed[i].local_health;
        bs.weight_factor = observed[i].weight_factor;
        bs.weight = b.weight;
        if (auto ref = registry_.find_backend(key, b.address)) {
            bs.id = ref->id;
            bs.generation = ref->generation;
        }
        if (auto applied = v.applied.find(b.address); applied != v.applied.end())
            bs.live = applied->second.live;
        if (auto member = table_weight_by_identity.find(identity);
            member != table_weight_by_identity.end()) {
            bs.in_table = true;
            bs.effective_weight = member->second;
        }
        if (auto slots = v.slots_by_identity.find(identity); slots != v.slots_by_identity.end())
            bs.slots = bs.in_table ? slots->second : 0;
        s.backends.push_back(bs);
    }
    return s;
}

std::vector<ApplyFailure> Reconciler::take_apply_failures() {
    std::vector<ApplyFailure> out;
    out.swap(apply_failures_);
    return out;
}

std::vector<PanicChange> Reconciler::take_panic_changes() {
    std::vector<PanicChange> out;
    out.swap(panic_changes_);
    return out;
}

bool Reconciler::all_published() const {
    if (!removed_.empty()) return false;
    return std::all_of(vips_.begin(), vips_.end(), [](const auto& kv) {
        return kv.second.live_version == kv.second.plan_version && kv.second.last_error.empty();
    });
}

}  // namespace xlb::control
