// The Server: a Router behind our own event-driven HTTP/1.1 server (Linux: epoll, non-blocking
// sockets, one I/O thread). Why not cpp-httplib any more: 0.11 holds a thread for each connection and
// its timeouts are per read(), not per request, so 256 clients sending a header byte a second held
// every thread for as long as they liked; and it has no request deadline to cancel work with. Here no
// thread waits on a socket: a connection is a state machine (idle, reading, running, writing,
// lingering) with one deadline, checked by the I/O thread between epoll waits.
#include "server/server.h"

#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <mutex>
#include <unordered_map>

namespace gpuplan::server {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Pending connections the kernel queues before the server accepts them: enough for a burst of a few
// hundred clients (the load benchmark opens 256 at once); the kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 1024;
// Bytes read from a socket per readiness event: a few requests, or a good slice of a 1 MiB body; one
// read per event keeps connections taking turns.
constexpr std::size_t kReadChunkBytes = std::size_t{64} * 1024;
// Events taken from epoll per wait.
constexpr int kMaxEvents = 256;
// An answer ready at (or after) the request's deadline (503 timeout, 408) still gets this long to be
// written before the connection is dropped.
constexpr auto kWriteGrace = 1000ms;
// After an answer that closes the connection, request bytes still arriving are read and dropped for
// this long (a lingering close), so that the client reads the answer instead of a TCP reset.
constexpr auto kLingerTime = 500ms;
// When accept() fails for lack of file descriptors, accepting pauses this long (the listening socket
// would otherwise report ready in a busy loop).
constexpr auto kAcceptPause = 100ms;
// The longest epoll wait when no deadline is nearer (stop() also wakes the loop at once).
constexpr auto kMaxWait = 1000ms;
// File descriptors the process needs besides connections (epoll, eventfd, stdio, catalog files).
constexpr rlim_t kSpareDescriptors = 64;
// A response buffer larger than this is released after it is written instead of kept for reuse.
constexpr std::size_t kKeepBufferBytes = std::size_t{64} * 1024;
// epoll keys of the two descriptors that are not connections (connection ids start above them).
constexpr std::uint64_t kListenKey = 0;
constexpr std::uint64_t kWakeKey = 1;

bool has_header(const HttpResponse& res, std::string_view name) {
  return std::any_of(res.headers.begin(), res.headers.end(), [&](const auto& h) {
    return h.first.size() == name.size() &&
           std::equal(h.first.begin(), h.first.end(), name.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           });
  });
}

// The bytes of a response (for HEAD the Router already dropped the body and set GET's Content-Length).
std::string serialize(const HttpResponse& res, bool close) {
  std::string out;
  out.reserve(res.body.size() + 512);
  out += "HTTP/1.1 ";
  out += std::to_string(res.status);
  out += ' ';
  out += reason_phrase(res.status);
  out += "\r\n";
  for (const auto& [k, v] : res.headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  if (res.status != 304) {
    if (!has_header(res, "Content-Type")) out += "Content-Type: " + res.content_type + "\r\n";
    if (!has_header(res, "Content-Length")) out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  out += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  if (res.status != 304) out += res.body;
  return out;
}

// A response the server writes itself (no Router): the JSON error body and the security headers.
HttpResponse own_response(HttpResponse res) {
  for (const auto& h : security_headers()) res.headers.push_back(h);
  return res;
}

std::string error_code_for(int status) {
  switch (status) {
    case 408:
      return "request_timeout";
    case 411:
      return "length_required";
    case 413:
      return "payload_too_large";
    case 414:
      return "uri_too_long";
    case 417:
      return "expectation_failed";
    case 431:
      return "headers_too_large";
    case 501:
      return "not_implemented";
    case 505:
      return "http_version_not_supported";
    default:
      return "bad_request";
  }
}

// The field a parser refusal concerns, for the JSON error body.
std::string error_field_for(int status) {
  switch (status) {
    case 411:
    case 501:
      return "Transfer-Encoding";
    case 413:
      return "Content-Length";
    case 414:
      return "path";
    case 417:
      return "Expect";
    case 431:
      return "headers";
    default:
      return "request";
  }
}

}  // namespace

struct Server::Impl {
  enum class Phase { kIdle, kReading, kRunning, kWriting, kLinger };

  struct Conn {
    int fd = -1;
    std::uint64_t id = 0;
    HttpParser parser;
    Phase phase = Phase::kIdle;
    Clock::time_point deadline;          // when the current phase ends
    Clock::time_point request_deadline;  // the request's one deadline, from its first byte
    Clock::time_point header_deadline;   // the head must be complete by then
    std::shared_ptr<CancelToken> token;  // the command in flight
    std::uint64_t job = 0;               // its number; a completion for another number is stale
    std::string pending;                 // bytes of the next request(s), read with the previous one
    std::string out;                     // the answer being written
    std::size_t out_sent = 0;
    bool close_after = false;
    bool keep_alive = true;
    bool continue_sent = false;
    std::uint32_t events = 0;  // what epoll watches for it
    explicit Conn(ParserLimits limits) : parser(limits) {}
  };

  struct Completion {
    std::uint64_t conn = 0;
    std::uint64_t job = 0;
    HttpResponse response;
  };

  // Where workers leave finished answers for the I/O thread. Shared with the jobs, which may finish
  // after the server stopped looking.
  struct Mailbox {
    std::mutex mu;
    std::vector<Completion> items;
    int wake_fd = -1;
    Mailbox() = default;
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;
    ~Mailbox() {
      if (wake_fd >= 0) ::close(wake_fd);
    }
    void post(Completion c) {
      {
        std::lock_guard<std::mutex> lock(mu);
        items.push_back(std::move(c));
      }
      wake();
    }
    void wake() const {
      const std::uint64_t one = 1;
      if (wake_fd >= 0) (void)!::write(wake_fd, &one, sizeof one);
    }
  };

  explicit Impl(Router r) : router(std::move(r)) {
    const Options& o = router.options();
    limits.max_body_bytes = o.max_body_bytes;
    limits.max_head_bytes = o.max_head_bytes;
    limits.max_request_line_bytes = o.max_head_bytes;
    limits.max_headers = o.max_headers;
    mailbox->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (mailbox->wake_fd >= 0 && epoll_fd >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kWakeKey;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, mailbox->wake_fd, &ev);
    }
    read_buffer.resize(kReadChunkBytes);
  }
  ~Impl() {
    for (auto& [id, c] : conns) ::close(c->fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    // The Router and its workers go next (members, in reverse order); a job that finishes meanwhile
    // posts into the mailbox, which the jobs share and which closes its descriptor last.
  }

  const Options& opt() const { return router.options(); }

  void watch(Conn& c, std::uint32_t events) {
    if (c.events == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &ev);
    c.events = events;
  }

  void set_deadline(Conn& c, Clock::time_point t) {
    c.deadline = t;
    next_sweep = std::min(next_sweep, t);
  }

  void close_conn(std::uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (c.token) c.token->cancel();  // nobody is left to read the answer
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns.erase(it);
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop watching the listening socket for a moment.
          epoll_event ev{};
          ev.data.u64 = kListenKey;
          ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
          accept_paused_until = Clock::now() + kAcceptPause;
          next_sweep = std::min(next_sweep, accept_paused_until);
        }
        return;  // EAGAIN: no more for now
      }
      if (conns.size() >= static_cast<std::size_t>(std::max(1, opt().max_connections))) {
        // Over the cap: a short 503 (best effort, never blocks) and close.
        (void)!::send(fd, over_capacity.data(), over_capacity.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      auto conn = std::make_unique<Conn>(limits);
      conn->fd = fd;
      conn->id = next_id++;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = conn->id;
      if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ::close(fd);
        continue;
      }
      conn->events = EPOLLIN;
      // A new connection has the header timeout to send its first byte.
      set_deadline(*conn, Clock::now() + opt().header_timeout);
      conns.emplace(conn->id, std::move(conn));
    }
  }

  void on_event(Conn& c, std::uint32_t events) {
    const std::uint64_t id = c.id;
    if (events & (EPOLLERR | EPOLLHUP)) {
      close_conn(id);
      return;
    }
    if ((events & EPOLLOUT) && c.phase == Phase::kWriting) {
      write_some(c);
      return;
    }
    if (!(events & EPOLLIN)) return;
    const ssize_t n = ::recv(c.fd, read_buffer.data(), read_buffer.size(), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_conn(id);  // the client went away (a partial request is simply dropped)
      return;
    }
    if (n < 0) return;
    if (c.phase == Phase::kLinger) return;  // dropped: the answer is already on its way
    if (c.phase == Phase::kRunning || c.phase == Phase::kWriting) {
      // The next request (pipelining) waits until this answer is written; past one read chunk of it,
      // the connection is not read until then.
      c.pending.append(read_buffer.data(), static_cast<std::size_t>(n));
      if (c.pending.size() >= kReadChunkBytes) watch(c, c.events & ~static_cast<std::uint32_t>(EPOLLIN));
      return;
    }
    if (!c.pending.empty()) {
      // Earlier bytes are waiting for run_ready(): these go behind them, in order.
      c.pending.append(read_buffer.data(), static_cast<std::size_t>(n));
      ready.push_back(c.id);
      return;
    }
    feed(c, std::string_view(read_buffer.data(), static_cast<std::size_t>(n)));
  }

  // Feeds bytes of the current request to the parser and acts on the outcome.
  void feed(Conn& c, std::string_view bytes) {
    const bool was_started = c.parser.started();
    const ParseResult r = c.parser.feed(bytes);
    if (!was_started && c.parser.started()) {
      const auto now = Clock::now();
      c.phase = Phase::kReading;
      c.request_deadline = now + opt().request_deadline;
      c.header_deadline = now + opt().header_timeout;
    }
    if (c.phase == Phase::kReading) {
      set_deadline(c, c.parser.head_complete() ? c.request_deadline : std::min(c.header_deadline, c.request_deadline));
    }
    switch (r.status) {
      case ParseStatus::kNeedMore:
        if (c.parser.head_complete() && c.parser.request().expect_continue && !c.continue_sent) {
          // The client waits for this before it sends the body (curl does for bodies over 1 KiB).
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          (void)!::send(c.fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          c.continue_sent = true;
        }
        return;
      case ParseStatus::kError: {
        c.keep_alive = false;
        respond(c,
                own_response(error_response(r.http_status, error_code_for(r.http_status), r.message,
                                            error_field_for(r.http_status))),
                true);
        return;
      }
      case ParseStatus::kComplete:
        c.pending.assign(bytes.substr(r.consumed));
        start(c);
        return;
    }
  }

  void start(Conn& c) {
    HttpRequest req = c.parser.take();
    c.parser.reset();
    c.continue_sent = false;
    c.keep_alive = req.keep_alive;
    Router::Plan plan = router.plan(req);
    if (plan.now) {
      respond(c, *plan.now, false);
      return;
    }
    c.phase = Phase::kRunning;
    // Still watched for reading: a client that hangs up cancels its command (close_conn), and the bytes
    // of a pipelined request wait in `pending`.
    set_deadline(c, c.request_deadline);
    c.token = std::make_shared<CancelToken>(c.request_deadline);
    c.job = next_job++;
    const bool head = req.method == "HEAD";
    const bool queued = router.submit(
        plan.lane, [r = &router, box = mailbox, id = c.id, job = c.job, token = c.token, req = std::move(req)] {
          Completion done{id, job, {}};
          if (!token->cancelled()) {
            done.response = r->respond(req, *token);
          }
          // A job whose deadline passed posts nothing: the I/O thread already answered 503.
          if (!token->cancelled()) box->post(std::move(done));
        });
    if (!queued) {
      c.token.reset();
      HttpResponse busy = own_response(busy_response());
      if (head) busy.body.clear();
      respond(c, busy, false);
    }
  }

  // Starts writing `res`; `close`: the connection ends after it.
  void respond(Conn& c, const HttpResponse& res, bool close) {
    c.close_after = close || !c.keep_alive || stopping.load();
    c.out = serialize(res, c.close_after);
    c.out_sent = 0;
    c.phase = Phase::kWriting;
    c.token.reset();
    const auto now = Clock::now();
    set_deadline(c, std::max(c.request_deadline, now + kWriteGrace));
    write_some(c);
  }

  void write_some(Conn& c) {
    while (c.out_sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          watch(c, EPOLLOUT | (c.events & EPOLLIN));
          return;
        }
        close_conn(c.id);
        return;
      }
      c.out_sent += static_cast<std::size_t>(n);
    }
    written(c);
  }

  void written(Conn& c) {
    if (c.out.capacity() > kKeepBufferBytes) {
      std::string().swap(c.out);
    } else {
      c.out.clear();
    }
    c.out_sent = 0;
    if (c.close_after) {
      ::shutdown(c.fd, SHUT_WR);
      c.phase = Phase::kLinger;
      c.pending.clear();
      watch(c, EPOLLIN);
      set_deadline(c, Clock::now() + kLingerTime);
      return;
    }
    c.phase = Phase::kIdle;
    watch(c, EPOLLIN);
    set_deadline(c, Clock::now() + opt().keep_alive_timeout);
    if (!c.pending.empty()) ready.push_back(c.id);  // pipelined: parsed from the main loop, not recursively
  }

  void take_completions() {
    std::uint64_t count = 0;  // one read takes the whole count and resets it
    (void)!::read(mailbox->wake_fd, &count, sizeof count);
    std::vector<Completion> items;
    {
      std::lock_guard<std::mutex> lock(mailbox->mu);
      items.swap(mailbox->items);
    }
    for (auto& done : items) {
      auto it = conns.find(done.conn);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (c.phase != Phase::kRunning || c.job != done.job) continue;  // answered at the deadline already
      respond(c, done.response, false);
    }
  }

  void run_ready() {
    while (!ready.empty()) {
      std::vector<std::uint64_t> now_ready;
      now_ready.swap(ready);
      for (std::uint64_t id : now_ready) {
        auto it = conns.find(id);
        if (it == conns.end()) continue;
        Conn& c = *it->second;
        if (c.phase != Phase::kIdle || c.pending.empty()) continue;
        std::string bytes = std::move(c.pending);
        c.pending.clear();
        feed(c, bytes);
      }
    }
  }

  // Ends the phases whose deadline passed and finds the next deadline.
  void sweep() {
    const auto now = Clock::now();
    if (accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
      accept_paused_until = {};
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenKey;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
    }
    next_sweep = accept_paused_until == Clock::time_point{} ? Clock::time_point::max() : accept_paused_until;
    std::vector<std::uint64_t> expired;
    for (auto& [id, c] : conns) {
      if (c->deadline <= now) {
        expired.push_back(id);
      } else {
        next_sweep = std::min(next_sweep, c->deadline);
      }
    }
    for (std::uint64_t id : expired) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      switch (c.phase) {
        case Phase::kReading: {
          // Something arrived but not a whole request in time: 408, then close.
          const bool head = c.parser.head_complete();
          c.keep_alive = false;
          respond(c,
                  own_response(error_response(
                      408, "request_timeout",
                      head ? "the request body did not arrive within the request deadline of " +
                                 std::to_string(opt().request_deadline.count()) + " ms"
                           : "the request line and headers did not arrive within " +
                                 std::to_string(std::min(opt().header_timeout, opt().request_deadline).count()) + " ms",
                      "request")),
                  true);
          break;
        }
        case Phase::kRunning: {
          // The deadline passed while the command runs or waits: stop it and answer now.
          if (c.token) c.token->cancel();
          ++c.job;  // its completion, if any, is stale
          respond(c, own_response(timeout_response(opt())), false);
          break;
        }
        case Phase::kIdle:
        case Phase::kWriting:
        case Phase::kLinger:
          close_conn(id);
          break;
      }
    }
  }

  void loop() {
    std::vector<epoll_event> events(kMaxEvents);
    while (!stopping.load()) {
      auto now = Clock::now();
      if (now >= next_sweep) {
        sweep();
        run_ready();
        now = Clock::now();
      }
      const auto wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(next_sweep - now),
                                   std::chrono::milliseconds(0), std::chrono::milliseconds(kMaxWait));
      const int n = ::epoll_wait(epoll_fd, events.data(), kMaxEvents, static_cast<int>(wait.count()));
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        const std::uint64_t key = events[static_cast<std::size_t>(i)].data.u64;
        const std::uint32_t what = events[static_cast<std::size_t>(i)].events;
        if (key == kListenKey) {
          accept_all();
        } else if (key == kWakeKey) {
          take_completions();
        } else if (auto it = conns.find(key); it != conns.end()) {
          on_event(*it->second, what);
        }
      }
      run_ready();
    }
    std::vector<std::uint64_t> ids;
    for (auto& [id, c] : conns) ids.push_back(id);
    for (std::uint64_t id : ids) close_conn(id);
  }

  Router router;
  std::shared_ptr<Mailbox> mailbox = std::make_shared<Mailbox>();
  ParserLimits limits;
  int listen_fd = -1;
  int epoll_fd = -1;
  std::atomic<bool> stopping{false};
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::vector<std::uint64_t> ready;
  std::uint64_t next_id = kWakeKey + 1;
  std::uint64_t next_job = 1;
  Clock::time_point next_sweep = Clock::time_point::max();
  Clock::time_point accept_paused_until{};
  std::string read_buffer;
  std::string over_capacity =
      serialize(own_response(error_response(503, "busy", "the server has too many open connections; try again")), true);
};

// glibc gives each thread that allocates its own heap arena (up to 8 per core), and memory freed in
// one arena is not reused by another: under the hostile load test (Hostile.EveryHostileClassAtOnce)
// RSS crept up 20-40 % a round with the default arenas, 0-27 % with two, and stayed flat with one
// (14.8 -> 15.2 MiB over five rounds). The server has an I/O thread and a few workers whose small
// allocations are served by glibc's per-thread caches, so one arena costs no measurable contention.
constexpr int kMallocArenas = 1;

Server::Server(Router router) : impl_(std::make_unique<Impl>(std::move(router))) {
  ::mallopt(M_ARENA_MAX, kMallocArenas);
}

Server::~Server() { stop(); }

Result<int> Server::bind() {
  const Options& o = impl_->router.options();
  auto fail = [&](const std::string& why) -> Error {
    return usage_error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (" + why + ")", "port");
  };
  if (impl_->epoll_fd < 0 || impl_->mailbox->wake_fd < 0) return fail(std::string("epoll: ") + std::strerror(errno));
  if (impl_->listen_fd >= 0) return fail("already bound");
  // Room for max_connections descriptors: raise the soft limit toward the hard one if needed.
  rlimit lim{};
  const rlim_t want = static_cast<rlim_t>(std::max(1, o.max_connections)) + kSpareDescriptors;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < want) {
    lim.rlim_cur = std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(o.port);
  if (const int rc = ::getaddrinfo(o.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return fail(std::string("not an address of this machine: ") + ::gai_strerror(rc));
  }
  std::string why = "address in use, or not an address of this machine";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return fail(why);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int bound = o.port;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenKey;
  if (::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return fail(std::string("epoll: ") + std::strerror(errno));
  }
  impl_->listen_fd = fd;
  return bound;
}

void Server::run() {
  if (impl_->listen_fd < 0) return;
  impl_->loop();
}

void Server::stop() {
  if (!impl_) return;
  impl_->stopping.store(true);
  impl_->mailbox->wake();
}

std::size_t Server::jobs() const { return impl_->router.jobs(); }

int serve(const Context& ctx, const Options& options) {
  std::signal(SIGPIPE, SIG_IGN);
  Server server(make_router(ctx, options));
  auto port = server.bind();
  if (!port) {
    std::cerr << "gpuplan: error: " << port.error().message << "\n";
    return exit_code(port.error().code);
  }
  const bool v6 = options.host.find(':') != std::string::npos;
  const std::string host = v6 ? "[" + options.host + "]" : options.host;
  std::cout << "gpuplan: serving the page and the API on http://" << host << ":" << *port
            << "/  (API: /api/v1, Ctrl-C to stop)" << std::endl;
  server.run();
  return 0;
}

}  // namespace gpuplan::server
