// Market speed at the library level (docs/market.md, "Speed"): live offers over 10,000 GPUs with mixed
// MIG layouts, from the view (no write since the last list) and right after a write (the view rebuilt),
// and rent+delete pairs (two write transactions) on the same inventory. The store is a SQLite file with
// synchronous=FULL, as `gpuplan serve` runs it, in the system's temp directory (a real disk), or under
// GPUPLAN_MARKET_BENCH_DIR: `make bench-check` points that at tmpfs, where an fsync waits for no disk,
// so that the tracked CPU time is the market's own work (scripts/bench-check.py).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "gpuplan/market.h"
#include "market/db.h"

namespace {

using namespace gpuplan::market;

constexpr int kNodes = 1250;       // x kGpusPerNode = 10,000 GPUs: the inventory
constexpr int kGpusPerNode = 8;    // an HGX board
constexpr int kRentedSlices = 64;  // slices held before measuring, so that claims are not all empty

[[noreturn]] void die(const std::string& what, const gpuplan::Error& e) {
  std::fprintf(stderr, "market_bench: %s: %s\n", what.c_str(), e.message.c_str());
  std::exit(1);
}
template <typename T>
T must(gpuplan::Result<T> r, const std::string& what) {
  if (!r) die(what, r.error());
  return std::move(*r);
}

RentRequest one_unit(const Offer& o) {
  RentRequest r;
  r.offer_id = o.id;
  return r;
}

// One market for every benchmark of this file, built once: 1,250 nodes of 8 A100s, a third without MIG,
// a third dynamic, a third with a static layout; three offers; a few slices rented.
struct Inventory {
  std::filesystem::path dir;
  std::unique_ptr<Market> market;
  Principal provider, renter;
  Offer whole, slice, three;

  Principal login(const IssuedToken& t) { return must(market->authenticate(t.token), "authenticate"); }
  Principal tenant(const Principal& platform, const std::string& name, TenantKind kind) {
    const Tenant t = must(market->create_tenant(platform, name, kind), "create_tenant");
    const User u = must(market->create_user(platform, t.id, name + "-admin", Role::kAdmin), "create_user");
    return login(must(market->create_token(platform, u.id), "create_token"));
  }

  Inventory() {
    const char* base = std::getenv("GPUPLAN_MARKET_BENCH_DIR");
    dir = (base && *base ? std::filesystem::path(base) : std::filesystem::temp_directory_path()) /
          ("gpuplan-market-bench-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    market = must(Market::open(must(open_store(dir.string()), "open_store")), "Market::open");
    const Principal platform = login(must(market->init_platform(), "init_platform"));
    provider = tenant(platform, "prov", TenantKind::kProvider);
    renter = tenant(platform, "acme", TenantKind::kRenter);
    for (int n = 0; n < kNodes; ++n) {
      const MigPolicy policy = n % 3 == 0 ? MigPolicy::kNone : n % 3 == 1 ? MigPolicy::kDynamic : MigPolicy::kStatic;
      NodeSpec spec{"n" + std::to_string(n),
                    "eu-west",
                    Interconnect::kNvlink,
                    128,
                    2048,
                    8000,
                    {},
                    Scheduler::kManual,
                    {},
                    {},
                    {}};
      for (int g = 0; g < kGpusPerNode; ++g) {
        spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-" + std::to_string(n) + "-" + std::to_string(g), policy,
                                    policy == MigPolicy::kStatic ? "3g.40gb,2g.20gb,1g.10gb,1g.10gb" : ""});
      }
      (void)must(market->add_node(provider, spec), "add_node");
    }
    whole = must(market->create_offer(provider, OfferSpec{"a100-80gb-sxm4", 1, "eu-west", 1'500'000, 0}), "offer");
    slice = must(market->create_offer(provider, OfferSpec{"a100-80gb-sxm4/1g.10gb", 1, "eu-west", 200'000, 0}), "o");
    three = must(market->create_offer(provider, OfferSpec{"a100-80gb-sxm4/3g.40gb", 1, "eu-west", 700'000, 0}), "o");
    for (int i = 0; i < kRentedSlices; ++i) (void)must(market->rent(renter, one_unit(slice)), "rent");
  }
  ~Inventory() {
    market.reset();
    std::filesystem::remove_all(dir);
  }
};

Inventory& inventory() {
  static Inventory inv;  // built on first use, so that --benchmark_list_tests stays instant
  return inv;
}

// GET /offers?source=market's work with no write since the previous list: the view answers.
void BM_LiveOffers10kGpus(benchmark::State& state) {
  Inventory& inv = inventory();
  (void)must(inv.market->list_offers(), "list_offers");  // the first list after the set-up builds the view
  for (auto _ : state) {
    auto offers = must(inv.market->list_offers(), "list_offers");
    benchmark::DoNotOptimize(offers);
  }
}
BENCHMARK(BM_LiveOffers10kGpus)->Unit(benchmark::kMillisecond);

// The first list after a write (here a price change, outside the timing): the view is rebuilt from one
// read of every GPU, claim and MIG instance.
void BM_LiveOffers10kGpusAfterWrite(benchmark::State& state) {
  Inventory& inv = inventory();
  int64_t price = 1'500'000;
  for (auto _ : state) {
    state.PauseTiming();
    (void)must(inv.market->set_offer_price(inv.provider, inv.whole.id, ++price), "set_offer_price");
    state.ResumeTiming();
    auto offers = must(inv.market->list_offers(), "list_offers");
    benchmark::DoNotOptimize(offers);
  }
}
BENCHMARK(BM_LiveOffers10kGpusAfterWrite)->Unit(benchmark::kMillisecond);

// rent + delete of one unit of `offer`: two write transactions, each fsync'd.
void rent_delete(benchmark::State& state, const Offer& offer) {
  Inventory& inv = inventory();
  for (auto _ : state) {
    const Rental r = must(inv.market->rent(inv.renter, one_unit(offer)), "rent");
    (void)must(inv.market->delete_rental(inv.renter, r.id), "delete_rental");
  }
  state.counters["reservations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
void BM_RentDeleteSlice10kGpus(benchmark::State& state) { rent_delete(state, inventory().slice); }
BENCHMARK(BM_RentDeleteSlice10kGpus)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_RentDeleteWholeGpu10kGpus(benchmark::State& state) { rent_delete(state, inventory().whole); }
BENCHMARK(BM_RentDeleteWholeGpu10kGpus)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
