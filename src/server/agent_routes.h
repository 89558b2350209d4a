// The node agent's endpoints under /api/v1/agent (issue #15; docs/market.md, "The node agent"), answered
// on the market's lane like every market route:
//   POST /agent/enroll     {enrollment_token, boot_id} -> 201 {node_id, agent_token, heartbeat_seconds} (public)
//   PUT  /agent/inventory  a full snapshot -> 200 the node's GPUs as the market now sees them
//   POST /agent/heartbeat  {seq, boot_id, running} -> 200 {desired, heartbeat_seconds, ignored}
// The last two take the agent token (Authorization: Bearer gpa_...) of the node they report on and nothing
// else: a user's token is 403 here, as the agent token is 403 on every other endpoint (market_routes.cc).
// 409 `stale`: an older seq or generation (fenced); 409 `inventory_required`: a heartbeat from another boot.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/market.h"
#include "server/http_parser.h"

namespace gpuplan::server {

struct HttpResponse;

// segments[0] == "agent".
HttpResponse agent_response(market::Market& market, const HttpRequest& request,
                            const std::vector<std::string>& segments, const Json& body);

}  // namespace gpuplan::server
