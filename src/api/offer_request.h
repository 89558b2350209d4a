// Offers as a request sees them: the files to read (the shipped snapshot unless `offers` is given),
// and the filter every command that ranks offers applies (provider, region, spot, staleness).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/request.h"
#include "gpuplan/offers.h"

namespace gpuplan::api {

// Offers older than this are flagged stale and not planned on, unless --max-age says otherwise.
// 180 days: list prices of GPU clouds change a few times a year (see data/offers/README.md). The
// request's default is data/options.yaml `max_age`; tests/unit/options_test.cc fails when they differ.
inline constexpr double kDefaultMaxOfferAgeDays = 180;
// A marketplace's ask (price_kind marketplace) older than this is dropped unless --max-age is given: its
// hosts reprice hourly, so a week-old ask says little about today's (issue #18). An older list price is
// kept, with price_age_warning's warning.
inline constexpr double kMarketplaceMaxAgeDays = 7;

struct OfferFilter {
  std::vector<std::string> providers;  // empty = all
  std::vector<std::string> regions;    // empty = all
  bool spot = false;
  double max_age_days = kDefaultMaxOfferAgeDays;
  bool max_age_given = false;  // --max-age was given: it drops every older offer, list prices too
  std::string now;             // ISO date staleness is measured at
};

// The request keys that choose and filter offers: offers, provider, region, spot, max_age, now.
bool is_offer_key(std::string_view key);

Result<OfferSet> offers_from_request(const Context& ctx, const Request& req);
Result<OfferFilter> offer_filter_from_request(const Request& req);
// Why an offer is not usable under the filter ("stale: ...", "unavailable", ...), or empty.
std::string offer_rejection(const Offer& o, const OfferFilter& f);
// A usable list price older than the filter's max age: "list price from 2024-08, may be stale (462 days
// old)"; empty when the price is younger (or a live market offer, or undated).
std::string price_age_warning(const Offer& o, const OfferFilter& f);
Json offer_json(const Offer& o, const OfferFilter& f);

}  // namespace gpuplan::api
