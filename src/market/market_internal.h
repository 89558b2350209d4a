// What the market's other files (market_agent.cc) use of market.cc's logic: the one transition function,
// the version bump that keys every process's offer view, token digests and ids. Not a public interface:
// a file of src/market only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/market.h"
#include "gpuplan/status.h"

namespace gpuplan {
class Catalog;
}

namespace gpuplan::market {
class Tx;
class Db;
}  // namespace gpuplan::market

namespace gpuplan::market::internal {

const Catalog& catalog(const Market::Impl& m);
int64_t now(const Market::Impl& m);
Db& db(Market::Impl& m);
// market_version + 1: the next list of offers rebuilds its view (inventory, claims or offers changed).
Status bump_version(Tx& tx);
std::string random_hex(size_t bytes);         // getrandom(2), 2 x bytes hex digits
std::string new_id(std::string_view prefix);  // prefix + 80 random bits
// A rental by id, any tenant's (the agent's node scope is checked by the caller), with its placements.
Result<Rental> load_rental(Tx& tx, std::string_view rental_id);
// THE transition function (Market::Impl::transition) on rental `rental_id`, actor "system".
Status transition(Market::Impl& m, Tx& tx, std::string_view rental_id, RentalState to, const std::string& reason);
const MarketOptions& options(const Market::Impl& m);

// The outbox (market_outbox.cc). After `r` became reserved: an apply row when its node has an engine
// (true), nothing for a manual node (false: the caller hands off at once).
Result<bool> enqueue_apply(Tx& tx, const Rental& r, int64_t now_ms);
// After rental `id` stopped ("stop") or ended ("delete"): a row that undoes its latest apply, if it had
// one and no stop or delete of that generation is queued yet.
Status enqueue_undo(Tx& tx, const std::string& rental_id, const std::string& action, int64_t now_ms);

// Fills each offer's `measured` from the benches of the GPUs behind it (market_bench.cc), in a read
// transaction of its own.
Status attach_measured(Market::Impl& m, std::vector<Offer>& offers);

}  // namespace gpuplan::market::internal
