// The market's HTTP endpoints under /api/v1 (issue #13; documented with every status in
// web/openapi.json): a thin layer from a request to one gpuplan::market::Market call and back to JSON.
// The Router sends a request here when is_market_route() says so, on the market's own worker lane (the
// calls wait on the store), with its JSON body already checked against the server's limits.
//   public:   GET /offers?source=market, GET /templates
//   platform: POST /tenants, POST /tenants/{id}/users, POST /tokens, DELETE /tokens/{id}
//   provider: POST /nodes, GET /nodes, POST /nodes/{id}/drain, DELETE /nodes/{id}, POST /offers,
//             DELETE /offers/{id}, GET /provider/rentals, GET /provider/earnings
//   renter:   POST /rentals, GET /rentals, GET /rentals/{id}, POST /rentals/{id}/stop|start,
//             DELETE /rentals/{id}, GET /rentals/{id}/events, GET /usage
// Authorization: Bearer <token> on everything but the public reads (401 without, 403 for a role that
// may not, 404 for another tenant's object); If-Match: <version> on stop, start and delete (412 stale).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/market.h"
#include "server/http_parser.h"

namespace gpuplan::server {

struct HttpResponse;

// Offers of this provider tenant are demo data (`make run`): their answers carry "demo": true.
inline constexpr std::string_view kDemoProviderName = "demo-provider";

// The market's answers, shared with the agent's routes (agent_routes.cc): a JSON body that is never
// cached (Cache-Control: no-store), and an Error as its HTTP status and JSON error body (401 with
// WWW-Authenticate: Bearer, 503 with Retry-After).
HttpResponse market_json_answer(int status, const Json& body);
HttpResponse market_error_answer(const Error& e);
// An offer's measured figures (PUT /agent/bench) as the offers and the bench answer show them.
Json measured_json(const market::OfferMeasured& m);

// Whether the request names a market resource (by its first path segment after /api/v1). /offers is
// shared with the offers-file command: the market answers GET /offers?source=market, DELETE
// /offers/{id} and a POST /offers that carries `Authorization: Bearer` (without one, POST /offers runs
// offers.list on the body's files, as before).
bool is_market_route(const HttpRequest& request, const std::vector<std::string>& segments);

// Runs the `plan` command on a request as POST /plan runs it (the server's offers files and a fresh
// snapshot of the market's live offers added): what POST /rentals {"plan": ...} rents from.
using PlanRunner = std::function<Result<Json>(const Json& plan_request)>;

// The answer to a market route. `body` is the parsed JSON body (an empty object for GET and DELETE).
// `plan`: how POST /rentals {"plan": ...} plans (absent: such a body is refused, 404 plan_unavailable).
HttpResponse market_response(market::Market& market, const HttpRequest& request,
                             const std::vector<std::string>& segments, const Json& body, const PlanRunner& plan = {});

// The market's live offers as GET /offers?source=market lists them ({"offers": [...]}, demo rows with
// "demo": true): the snapshot the server passes to offers.list, compare and plan as their `market` key,
// so that the library's commands stay pure.
Result<Json> market_offers_snapshot(const market::Market& market);

// The market's availability for catalog.list and catalog.show, passed as their `market` key: the live
// offers (as market_offers_snapshot) plus `last_available`: [{target, region, at_ms}] from the store
// (Market::last_available), so that the catalog's commands stay pure too.
Result<Json> market_availability_snapshot(const market::Market& market);

// The 404 a market route gets from a server started without a store.
HttpResponse market_disabled_response();

}  // namespace gpuplan::server
