// The request pool of net-ib: allocation up to capacity, release, stale ids and foreign pointers.
#include <gtest/gtest.h>

#include "requests.h"

using namespace tutti::netib;

TEST(NetIbRequests, AllocatesUpToCapacityThenRefuses) {
  RequestPool<4> pool;
  int owner = 0;
  Request* r[4];
  for (int i = 0; i < 4; i++) {
    r[i] = pool.alloc(ReqKind::Recv, &owner);
    ASSERT_NE(r[i], nullptr);
    EXPECT_EQ(r[i]->comm, &owner);
    EXPECT_EQ(r[i]->kind, ReqKind::Recv);
  }
  EXPECT_EQ(pool.inUse(), 4);
  EXPECT_EQ(pool.alloc(ReqKind::Send, &owner), nullptr);
  EXPECT_TRUE(pool.release(r[2]));
  Request* again = pool.alloc(ReqKind::Send, &owner);
  ASSERT_EQ(again, r[2]);
  EXPECT_EQ(again->kind, ReqKind::Send);
}

TEST(NetIbRequests, ReallocatedRequestIsReset) {
  RequestPool<2> pool;
  Request* r = pool.alloc(ReqKind::Recv, nullptr);
  r->events = 5;
  r->nreqs = 3;
  r->received[1] = 99;
  uint32_t index = r->index;
  pool.release(r);
  pool.alloc(ReqKind::Recv, nullptr);  // takes the other slot first (round robin)
  Request* s = pool.alloc(ReqKind::Recv, nullptr);
  ASSERT_EQ(s, r);
  EXPECT_EQ(s->index, index);
  EXPECT_EQ(s->events, 0);
  EXPECT_EQ(s->nreqs, 1);
  EXPECT_EQ(s->received[1], 0);
}

TEST(NetIbRequests, LiveLooksUpOnlyRequestsInUse) {
  RequestPool<3> pool;
  Request* r = pool.alloc(ReqKind::Send, nullptr);
  EXPECT_EQ(pool.live(r->index), r);
  EXPECT_EQ(pool.live(r->index + 1), nullptr);  // free slot: a stale completion is ignored
  EXPECT_EQ(pool.live(3), nullptr);             // out of range
  EXPECT_EQ(pool.live(0xffffffffu), nullptr);
  pool.release(r);
  EXPECT_EQ(pool.live(r->index), nullptr);
}

TEST(NetIbRequests, DoubleAndForeignReleaseAreRefused) {
  RequestPool<2> pool, other;
  Request* r = pool.alloc(ReqKind::Send, nullptr);
  Request* o = other.alloc(ReqKind::Send, nullptr);
  EXPECT_FALSE(pool.release(o));
  EXPECT_TRUE(pool.release(r));
  EXPECT_FALSE(pool.release(r));
  EXPECT_EQ(pool.inUse(), 0);
  EXPECT_EQ(other.inUse(), 1);
  Request stack;
  EXPECT_FALSE(pool.owns(&stack));
}
