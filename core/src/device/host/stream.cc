#include "device/host/stream.h"

#include "util/check.h"

#include <atomic>
#include <set>

namespace tutti::host {

// One recorded operation of a capture lane.
struct CaptureNode {
  enum Kind { Work, Record, Wait, RecordExternal, WaitExternal } kind;
  WorkItem work;  // Work
  int slot = -1;  // Record / Wait: the capture's event slot; the *External kinds: index of its generation
  std::shared_ptr<EventState> event = {};  // the *External kinds
};

struct Capture {
  std::mutex mutex;
  uint64_t id = 0;
  std::vector<HostStream*> members;  // lane i's stream while capturing (lane 0: the origin)
  std::vector<std::vector<CaptureNode>> lanes;
  int nSlots = 0;
  std::string invalid;  // why the capture cannot become a graph (empty: it can)
  bool ended = false;   // endCapture ran: no stream records into it any more
  int nExternal = 0;  // external record / wait nodes
  std::vector<std::pair<void*, void (*)(void*)>> kept;
  // Launches of one graph run one after another, in launch order (tickets).
  std::mutex replayMutex;
  std::condition_variable replayCv;
  uint64_t launched = 0, replayed = 0;
  ~Capture() {
    for (auto& [obj, destroy] : kept) destroy(obj);
  }
};

struct EventState {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0;   // generation of the last record outside a capture
  uint64_t completed = 0;  // highest generation that has run
  ncclResult_t error = ncclSuccess;  // carried by the completed generation
  // Set while the last record was made in a capture: a wait then joins that capture. Weak: the event does
  // not keep a graph's resources.
  std::weak_ptr<Capture> capture;
  int captureSlot = -1;

  // A record outside any capture: its generation (waits recorded after it target that one).
  uint64_t nextRecord() {
    std::lock_guard<std::mutex> lock(mutex);
    capture.reset();
    captureSlot = -1;
    return ++recorded;
  }
  uint64_t lastRecord() {
    std::lock_guard<std::mutex> lock(mutex);
    return recorded;
  }
  void complete(uint64_t gen, ncclResult_t err) {
    std::lock_guard<std::mutex> lock(mutex);
    if (gen > completed) {
      completed = gen;
      error = err;
    }
    cv.notify_all();
  }
  ncclResult_t waitFor(uint64_t gen) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return completed >= gen; });
    return error;
  }
};

namespace {

std::mutex gRegistryMutex;
std::set<const void*>& registry() {
  static auto* s = new std::set<const void*>();
  return *s;
}
bool registered(const void* p) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  return registry().count(p) != 0;
}
void enroll(const void* p) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().insert(p);
}
void withdraw(const void* p) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().erase(p);
}

// Where work that cannot return its error (a host function) reports it: the item or graph node running on
// this thread.
thread_local ncclResult_t* tFail = nullptr;

// Runs one item with failCurrent() pointed at its own slot; the item's result, or what it reported.
ncclResult_t runItem(WorkItem& work) {
  ncclResult_t failed = ncclSuccess;
  ncclResult_t* saved = tFail;
  tFail = &failed;
  ncclResult_t res = work();
  tFail = saved;
  return res != ncclSuccess ? res : failed;
}

std::atomic<uint64_t> gCaptureIds{0};

// Runs capture `c` once, as launch `ticket` of it: a thread per lane, records and waits through per-run slots,
// external records and waits on the generations its launch assigned (`gens`).
ncclResult_t replay(Capture& c, uint64_t ticket, const std::vector<uint64_t>& gens) {
  {
    std::unique_lock<std::mutex> turn(c.replayMutex);
    c.replayCv.wait(turn, [&] { return c.replayed == ticket; });
  }
  struct Done {
    Capture& c;
    ~Done() {
      std::lock_guard<std::mutex> turn(c.replayMutex);
      ++c.replayed;
      c.replayCv.notify_all();
    }
  } done{c};
  struct Slot {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t error = ncclSuccess;
  };
  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < c.nSlots; ++i) slots.push_back(std::make_unique<Slot>());
  auto runLane = [&](size_t lane) -> ncclResult_t {
    ncclResult_t err = ncclSuccess;
    for (CaptureNode& n : c.lanes[lane]) {
      switch (n.kind) {
        case CaptureNode::Work: {
          // Work after a failure still runs, as on a stream: the launch's host functions that follow a failed
          // kernel release what it holds. The first error is the lane's, carried by its records.
          const ncclResult_t res = runItem(n.work);
          if (err == ncclSuccess) err = res;
          break;
        }
        case CaptureNode::Record: {
          Slot& s = *slots[n.slot];
          std::lock_guard<std::mutex> lock(s.m);
          s.done = true;
          s.error = err;
          s.cv.notify_all();
          break;
        }
        case CaptureNode::Wait: {
          Slot& s = *slots[n.slot];
          std::unique_lock<std::mutex> lock(s.m);
          s.cv.wait(lock, [&] { return s.done; });
          if (err == ncclSuccess) err = s.error;
          break;
        }
        case CaptureNode::RecordExternal: n.event->complete(gens[n.slot], ncclSuccess); break;
        case CaptureNode::WaitExternal: n.event->waitFor(gens[n.slot]); break;  // ordering only
      }
    }
    return err;
  };
  if (c.lanes.size() == 1) return runLane(0);
  WorkGroup others;
  others.add(static_cast<int>(c.lanes.size()) - 1);
  for (size_t lane = 1; lane < c.lanes.size(); ++lane) executorSubmit([&runLane, lane] { return runLane(lane); }, &others);
  const ncclResult_t first = runLane(0);
  const ncclResult_t rest = others.wait();
  return first != ncclSuccess ? first : rest;
}

}  // namespace

// ---- Events -------------------------------------------------------------------------------------------------

StreamEvent::StreamEvent() : state_(std::make_shared<EventState>()) { enroll(this); }
StreamEvent::~StreamEvent() { withdraw(this); }

StreamEvent* StreamEvent::fromHandle(const void* handle) {
  return registered(handle) ? static_cast<StreamEvent*>(const_cast<void*>(handle)) : nullptr;
}

ncclResult_t StreamEvent::query() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->completed < state_->recorded) return ncclInProgress;
  return state_->error;
}

ncclResult_t StreamEvent::synchronize() {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    gen = state_->recorded;
  }
  return state_->waitFor(gen);
}

// ---- Graphs -------------------------------------------------------------------------------------------------

StreamGraph::StreamGraph(std::shared_ptr<Capture> c) : capture_(std::move(c)) { enroll(this); }
StreamGraph::~StreamGraph() { withdraw(this); }

StreamGraph* StreamGraph::fromHandle(const void* handle) {
  return registered(handle) ? static_cast<StreamGraph*>(const_cast<void*>(handle)) : nullptr;
}

void StreamGraph::launch(HostStream* stream) {
  // External nodes bind now, in launch order: each record becomes its event's newest record, each wait takes
  // the record newest at this point (an earlier record of this launch, or what ran before it).
  std::vector<uint64_t> gens(capture_->nExternal);
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> turn(capture_->replayMutex);
    ticket = capture_->launched++;
    for (const auto& lane : capture_->lanes)
      for (const CaptureNode& n : lane) {
        if (n.kind == CaptureNode::RecordExternal) gens[n.slot] = n.event->nextRecord();
        if (n.kind == CaptureNode::WaitExternal) gens[n.slot] = n.event->lastRecord();
      }
  }
  // The queued run holds the graph's content: the graph may be destroyed before it runs (as in CUDA).
  stream->enqueue([c = capture_, ticket, gens = std::move(gens)] { return replay(*c, ticket, gens); });
}

size_t StreamGraph::nodes() const {
  size_t n = 0;
  for (const auto& lane : capture_->lanes) n += lane.size();
  return n;
}

// ---- Streams ------------------------------------------------------------------------------------------------

HostStream::HostStream() {
  thread_ = std::thread([this] { loop(); });
  enroll(this);
}

HostStream::~HostStream() {
  withdraw(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    if (capture_) {
      std::lock_guard<std::mutex> clock(capture_->mutex);
      if (capture_->invalid.empty()) capture_->invalid = "a stream taking part in it was destroyed";
      capture_->members[lane_] = nullptr;
      capture_.reset();
    }
  }
  cv_.notify_all();
  thread_.join();
}

HostStream* HostStream::fromHandle(cudaStream_t handle) {
  return registered(handle) ? reinterpret_cast<HostStream*>(handle) : nullptr;
}

void HostStream::failCurrent(ncclResult_t res) {
  if (tFail && *tFail == ncclSuccess) *tFail = res;
}

void HostStream::enqueue(WorkItem work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) {
      std::lock_guard<std::mutex> clock(capture_->mutex);
      capture_->lanes[lane_].push_back({CaptureNode::Work, std::move(work), -1, {}});
      return;
    }
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    WorkItem work = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    ncclResult_t res = runItem(work);
    work = nullptr;  // its captures go before synchronize() can return
    lock.lock();
    running_ = false;
    if (res != ncclSuccess && error_ == ncclSuccess) error_ = res;
    cv_.notify_all();
  }
}

ncclResult_t HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (capture_)
    TUTTI_FAIL(ncclInvalidUsage, "stream {} is capturing: it cannot be synchronized until the capture ends",
               static_cast<void*>(this));
  cv_.wait(lock, [&] { return queue_.empty() && !running_; });
  ncclResult_t res = error_;
  error_ = ncclSuccess;
  return res;
}

ncclResult_t HostStream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != ncclSuccess) return error_;
  return queue_.empty() && !running_ ? ncclSuccess : ncclInProgress;
}

ncclResult_t HostStream::recordEvent(StreamEvent* e) {
  EventState& ev = *e->state_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) {
    int slot;
    {
      std::lock_guard<std::mutex> clock(capture_->mutex);
      slot = capture_->nSlots++;
      capture_->lanes[lane_].push_back({CaptureNode::Record, nullptr, slot, {}});
    }
    std::lock_guard<std::mutex> elock(ev.mutex);
    ev.capture = capture_;
    ev.captureSlot = slot;
    return ncclSuccess;
  }
  const uint64_t gen = ev.nextRecord();
  // The marker carries the stream's error as it stands when the marker runs.
  queue_.push_back([this, state = e->state_, gen] {
    ncclResult_t err;
    {
      std::lock_guard<std::mutex> l(mutex_);
      err = error_;
    }
    state->complete(gen, err);
    return ncclSuccess;
  });
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t HostStream::waitEvent(StreamEvent* e) {
  EventState& ev = *e->state_;
  std::shared_ptr<Capture> evCapture;
  int slot = -1;
  uint64_t gen = 0;
  bool capturedRecord = false;
  {
    std::lock_guard<std::mutex> elock(ev.mutex);
    capturedRecord = ev.captureSlot >= 0;
    evCapture = ev.capture.lock();
    slot = ev.captureSlot;
    gen = ev.recorded;
  }
  if (capturedRecord && (!evCapture || evCapture->ended))
    TUTTI_FAIL(ncclInvalidUsage, "stream {} waits on an event last recorded in a capture that has ended (record it "
               "again outside the capture first)", static_cast<void*>(this));
  std::lock_guard<std::mutex> lock(mutex_);
  if (evCapture) {
    if (capture_ && capture_ != evCapture)
      TUTTI_FAIL(ncclInvalidUsage, "stream {} takes part in one capture and waits on an event recorded in another",
                 static_cast<void*>(this));
    std::lock_guard<std::mutex> clock(evCapture->mutex);
    if (!capture_) {  // joins the capture, with a lane of its own
      capture_ = evCapture;
      lane_ = static_cast<int>(evCapture->lanes.size());
      evCapture->lanes.emplace_back();
      evCapture->members.push_back(this);
    }
    evCapture->lanes[lane_].push_back({CaptureNode::Wait, nullptr, slot, {}});
    return ncclSuccess;
  }
  if (capture_)
    TUTTI_FAIL(ncclInvalidUsage, "stream {} is capturing and waits on an event recorded outside the capture (a graph "
               "cannot depend on work outside it)", static_cast<void*>(this));
  if (gen == 0) return ncclSuccess;  // never recorded: nothing to wait for (as CUDA)
  queue_.push_back([state = e->state_, gen] { return state->waitFor(gen); });
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t HostStream::recordEventExternal(StreamEvent* e) {
  EventState& ev = *e->state_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) {
    std::lock_guard<std::mutex> clock(capture_->mutex);
    capture_->lanes[lane_].push_back({CaptureNode::RecordExternal, nullptr, capture_->nExternal++, e->state_});
    return ncclSuccess;
  }
  const uint64_t gen = ev.nextRecord();
  queue_.push_back([state = e->state_, gen] {
    state->complete(gen, ncclSuccess);
    return ncclSuccess;
  });
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t HostStream::waitEventExternal(StreamEvent* e) {
  EventState& ev = *e->state_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) {
    std::lock_guard<std::mutex> clock(capture_->mutex);
    capture_->lanes[lane_].push_back({CaptureNode::WaitExternal, nullptr, capture_->nExternal++, e->state_});
    return ncclSuccess;
  }
  const uint64_t gen = ev.lastRecord();
  if (gen == 0) return ncclSuccess;
  queue_.push_back([state = e->state_, gen] {
    state->waitFor(gen);  // ordering only
    return ncclSuccess;
  });
  cv_.notify_all();
  return ncclSuccess;
}

ncclResult_t HostStream::beginCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) TUTTI_FAIL(ncclInvalidUsage, "stream {} is already capturing", static_cast<void*>(this));
  capture_ = std::make_shared<Capture>();
  capture_->id = ++gCaptureIds;
  capture_->members.push_back(this);
  capture_->lanes.emplace_back();
  lane_ = 0;
  return ncclSuccess;
}

bool HostStream::capturing(uint64_t* id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id) *id = capture_ ? capture_->id : 0;
  return capture_ != nullptr;
}

ncclResult_t HostStream::keepWithCapture(void* obj, void (*destroy)(void*)) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_) TUTTI_FAIL(ncclInternalError, "stream {} is not capturing", static_cast<void*>(this));
  std::lock_guard<std::mutex> clock(capture_->mutex);
  capture_->kept.emplace_back(obj, destroy);
  return ncclSuccess;
}

ncclResult_t HostStream::endCapture(StreamGraph** graph) {
  std::shared_ptr<Capture> c;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!capture_) TUTTI_FAIL(ncclInvalidUsage, "stream {} is not capturing", static_cast<void*>(this));
    if (lane_ != 0)
      TUTTI_FAIL(ncclInvalidUsage, "stream {} joined a capture that another stream started: only that one ends it",
                 static_cast<void*>(this));
    c = capture_;
  }
  std::string why;
  std::vector<HostStream*> members;
  {
    std::lock_guard<std::mutex> clock(c->mutex);
    c->ended = true;
    members = c->members;
    why = c->invalid;
    // Every lane but the origin must be joined back: the origin, or a lane joined back itself, waits on an
    // event recorded as the lane's last operation.
    const size_t n = c->lanes.size();
    std::vector<int> lastRecord(n, -1);
    for (size_t l = 1; l < n; ++l)
      if (!c->lanes[l].empty() && c->lanes[l].back().kind == CaptureNode::Record) lastRecord[l] = c->lanes[l].back().slot;
    std::vector<bool> joined(n, false);
    joined[0] = true;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t l = 1; l < n; ++l) {
        if (joined[l] || lastRecord[l] < 0) continue;
        for (size_t m = 0; m < n && !joined[l]; ++m) {
          if (!joined[m]) continue;
          for (const CaptureNode& node : c->lanes[m])
            if (node.kind == CaptureNode::Wait && node.slot == lastRecord[l]) {
              joined[l] = changed = true;
              break;
            }
        }
      }
    }
    for (size_t l = 1; l < n && why.empty(); ++l)
      if (!joined[l])
        why = fmt::format("stream {} was pulled into the capture and not joined back (the capturing stream must wait "
                          "on an event recorded last on it)", static_cast<void*>(members[l]));
  }
  for (HostStream* s : members) {
    if (!s) continue;
    std::lock_guard<std::mutex> lock(s->mutex_);
    if (s->capture_ == c) {
      s->capture_.reset();
      s->lane_ = -1;
    }
  }
  if (!why.empty()) TUTTI_FAIL(ncclInvalidUsage, "stream {}: capture failed: {}", static_cast<void*>(this), why);
  *graph = new StreamGraph(std::move(c));
  return ncclSuccess;
}

}  // namespace tutti::host
