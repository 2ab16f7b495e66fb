#include "agent/log_shipping.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

constexpr LogLimits kLimits{.rotate_bytes = 100, .max_backlog = 400, .bytes_per_pass = 50};

TEST(PlanLogShipping, ShipsInBoundedPiecesAndRotatesOnlyWhatWasShipped) {
  EXPECT_EQ(PlanLogShipping(30, 0, kLimits).ship, 30);
  EXPECT_FALSE(PlanLogShipping(30, 0, kLimits).rotate);
  // Over the rotation size but not all shipped: ship a piece, do not rotate yet.
  ShipPlan p = PlanLogShipping(150, 0, kLimits);
  EXPECT_EQ(p.ship, 50);
  EXPECT_FALSE(p.rotate);
  EXPECT_EQ(p.drop, 0);
  // The last piece: then rotate.
  p = PlanLogShipping(150, 100, kLimits);
  EXPECT_EQ(p.ship, 50);
  EXPECT_TRUE(p.rotate);
  // Nothing new and small: nothing to do.
  p = PlanLogShipping(30, 30, kLimits);
  EXPECT_EQ(p.ship, 0);
  EXPECT_FALSE(p.rotate);
}

TEST(PlanLogShipping, ABacklogOverTheBoundIsDroppedAndCounted) {
  ShipPlan p = PlanLogShipping(1000, 100, kLimits);
  EXPECT_EQ(p.drop, 900);
  EXPECT_EQ(p.ship, 0);
  EXPECT_TRUE(p.rotate);
  EXPECT_EQ(PlanLogShipping(500, 100, kLimits).drop, 0);  // exactly the bound: kept
}

TEST(PlanLogShipping, EveryByteIsShippedOrCountedAsDropped) {
  // A task writing 37 bytes between passes, a server taking 50 a pass: nothing is lost and
  // the file stays bounded.
  int64_t size = 0, read = 0, shipped = 0, written = 0, dropped = 0, max_size = 0;
  for (int pass = 0; pass < 1000; ++pass) {
    size += 37;
    written += 37;
    max_size = std::max(max_size, size);
    ShipPlan p = PlanLogShipping(size, read, kLimits);
    dropped += p.drop;
    read += p.ship;
    shipped += p.ship;
    if (p.rotate) size = read = 0;
  }
  EXPECT_EQ(shipped + dropped + (size - read), written);
  EXPECT_EQ(dropped, 0);
  EXPECT_LE(max_size, kLimits.rotate_bytes + 2 * 37);
}

TEST(DroppedLogMarker, SaysHowMuchAndWhere) {
  std::string m =
      DroppedLogMarker(900, DropCause::kBacklog, "/var/lib/gpucloud/logs/x.log", "node-a");
  EXPECT_NE(m.find("900 bytes"), std::string::npos);
  EXPECT_NE(m.find("x.log.1 on node node-a"), std::string::npos);
  EXPECT_TRUE(m.starts_with("\n") && m.ends_with("]\n"));
  m = DroppedLogMarker(77, DropCause::kQuota, "/var/lib/gpucloud/logs/x.log", "node-a");
  EXPECT_NE(m.find("77 bytes"), std::string::npos);
  EXPECT_NE(m.find("quota"), std::string::npos);
  EXPECT_NE(m.find("x.log or its rotated copies"), std::string::npos);
  EXPECT_TRUE(m.starts_with("\n") && m.ends_with("]\n"));
}

TEST(PlanLogShipping, OverQuotaEverythingUnshippedIsDroppedAndNothingShipped) {
  ShipPlan p = PlanLogShipping(80, 30, kLimits, /*over_quota=*/true);
  EXPECT_EQ(p.drop, 50);
  EXPECT_EQ(p.ship, 0);
  EXPECT_FALSE(p.rotate);
  // Past the rotation size the file rotates, so a full namespace leaves the node's disk bounded.
  p = PlanLogShipping(150, 0, kLimits, true);
  EXPECT_EQ(p.drop, 150);
  EXPECT_TRUE(p.rotate);
  EXPECT_EQ(PlanLogShipping(150, 150, kLimits, true).drop, 0);
  EXPECT_FALSE(PlanLogShipping(150, 150, kLimits, true).rotate);
}

TEST(ReadShipAnswer, TellsTheServersAnswersApart) {
  using Kind = ShipAnswer::Kind;
  EXPECT_EQ(ReadShipAnswer(200, R"({"size":12})").kind, Kind::kStored);
  ShipAnswer a = ReadShipAnswer(409, R"({"size":7})");
  EXPECT_EQ(a.kind, Kind::kOtherSize);
  EXPECT_EQ(a.size, 7);
  a = ReadShipAnswer(429, R"({"kind":"Status","reason":"QuotaExceeded","message":"namespace a )"
                          R"(is full","details":{"size":40,"retryAfterSeconds":30}})");
  EXPECT_EQ(a.kind, Kind::kOverQuota);
  EXPECT_EQ(a.size, 40);
  EXPECT_EQ(a.retry_after_s, 30);
  EXPECT_EQ(a.message, "namespace a is full");
  // Retry-After bounded, defaulted when missing.
  EXPECT_EQ(ReadShipAnswer(429, R"({"reason":"QuotaExceeded","details":{"size":1,)"
                                R"("retryAfterSeconds":999999}})")
                .retry_after_s,
            600);
  EXPECT_EQ(ReadShipAnswer(429, R"({"reason":"QuotaExceeded","details":{"size":1}})").retry_after_s,
            30);
  // A rate limit or a server error: the same chunk later; a missing job: gone.
  EXPECT_EQ(ReadShipAnswer(429, R"({"reason":"TooManyRequests"})").kind, Kind::kLater);
  EXPECT_EQ(ReadShipAnswer(500, "").kind, Kind::kLater);
  EXPECT_EQ(ReadShipAnswer(404, R"({"reason":"NotFound"})").kind, Kind::kGone);
  // Bodies that are not what they should be do not throw.
  EXPECT_EQ(ReadShipAnswer(429, R"({"reason":7,"details":[1]})").kind, Kind::kLater);
  EXPECT_EQ(ReadShipAnswer(429, R"({"reason":"QuotaExceeded","details":{"size":"x"}})").size, 0);
  EXPECT_EQ(ReadShipAnswer(409, "not json").size, 0);
}

TEST(ApplyShipAnswer, OverQuotaTheKeptPartIsShippedAndTheRestDroppedNotRetried) {
  ShipAnswer over{.kind = ShipAnswer::Kind::kOverQuota, .size = 104, .retry_after_s = 30};
  LogCursor c{.read_pos = 50, .shipped = 100};
  EXPECT_FALSE(ApplyShipAnswer(over, 10, ChunkKind::kFile, c));
  EXPECT_EQ(c.shipped, 104);
  EXPECT_EQ(c.read_pos, 60);  // past the chunk: it is not sent again
  EXPECT_EQ(c.dropped, 6);
  EXPECT_EQ(c.cause, DropCause::kQuota);
  EXPECT_TRUE(c.over_quota);
  // A marker that did not fit stays pending whole (only what was kept moves the offset).
  over.size = 105;
  EXPECT_FALSE(ApplyShipAnswer(over, 40, ChunkKind::kMarker, c));
  EXPECT_EQ(c.shipped, 105);
  EXPECT_EQ(c.dropped, 6);
  EXPECT_EQ(c.read_pos, 60);
  // Taken: shipping goes on.
  EXPECT_TRUE(ApplyShipAnswer({.kind = ShipAnswer::Kind::kStored}, 40, ChunkKind::kMarker, c));
  EXPECT_EQ(c.shipped, 145);
  EXPECT_FALSE(c.over_quota);
  // 409 follows the server; the rest leaves the cursor or gives the log up.
  EXPECT_FALSE(
      ApplyShipAnswer({.kind = ShipAnswer::Kind::kOtherSize, .size = 150}, 8, ChunkKind::kFile, c));
  EXPECT_EQ(c.shipped, 150);
  EXPECT_EQ(c.read_pos, 65);
  EXPECT_FALSE(ApplyShipAnswer({.kind = ShipAnswer::Kind::kLater}, 8, ChunkKind::kFile, c));
  EXPECT_EQ(c.read_pos, 65);
  EXPECT_FALSE(c.gone);
  EXPECT_FALSE(ApplyShipAnswer({.kind = ShipAnswer::Kind::kGone}, 8, ChunkKind::kFile, c));
  EXPECT_TRUE(c.gone);
}

// The server's side of the protocol, as rest_cluster.cc answers it: a chunk at an offset, a
// namespace quota (here: on this one log), 429 with the size when part of it was refused.
struct FakeLogServer {
  std::string log;
  int64_t quota;
  ShipAnswer Post(int64_t offset, const std::string& data) {
    const int64_t size = static_cast<int64_t>(log.size());
    if (offset > size) return ReadShipAnswer(409, Cat("{\"size\":", size, "}"));
    std::string fresh = data.substr(std::min<size_t>(data.size(), size - offset));
    int64_t keep = std::min<int64_t>(fresh.size(), std::max<int64_t>(0, quota - size));
    log += fresh.substr(0, keep);
    if (keep == static_cast<int64_t>(fresh.size())) {
      return ReadShipAnswer(200, Cat("{\"size\":", log.size(), "}"));
    }
    return ReadShipAnswer(429, Cat(R"({"reason":"QuotaExceeded","details":{"size":)", log.size(),
                                   R"(,"retryAfterSeconds":3}})"));
  }
};

TEST(LogShipping, AFullNamespaceDropsAndCountsOutputThenShipsNewOutputOnceThereIsRoom) {
  // A task writing 37 bytes a pass into a server whose quota fills at pass ~10; room comes back
  // at pass 60 (a job was deleted). The agent's pass, as node_agent.cc runs it (no rotation).
  const LogLimits limits{.rotate_bytes = 1 << 30, .max_backlog = 1 << 30, .bytes_per_pass = 50};
  FakeLogServer server{.quota = 400};
  LogCursor c;
  std::string file;
  int64_t written = 0, output_on_server = 0, reported = 0, last_file_end = 0;
  int retry_pass = 0;
  for (int pass = 0; pass < 100; ++pass) {
    if (pass == 60) server.quota = 1 << 20;
    file += std::string(36, 'a' + pass % 26) + "\n";
    written += 37;
    ShipPlan p = PlanLogShipping(file.size(), c.read_pos, limits, c.over_quota);
    c.dropped += p.drop;
    c.read_pos += p.drop;
    if (c.over_quota && p.drop > 0) c.cause = DropCause::kQuota;
    if (pass < retry_pass) continue;
    if (c.dropped > 0) {
      std::string marker = DroppedLogMarker(c.dropped, c.cause, "x.log", "node-a");
      ShipAnswer a = server.Post(c.shipped, marker);
      if (!ApplyShipAnswer(a, marker.size(), ChunkKind::kMarker, c)) {
        if (c.over_quota) retry_pass = pass + 3;
        continue;
      }
      reported += c.dropped;
      c.dropped = 0;
    }
    if (p.ship == 0) continue;
    // Each byte of the file is sent once: never the same chunk again.
    ASSERT_GE(c.read_pos, last_file_end);
    last_file_end = c.read_pos + p.ship;
    const int64_t before = c.shipped;
    ShipAnswer a = server.Post(c.shipped, file.substr(c.read_pos, p.ship));
    ApplyShipAnswer(a, p.ship, ChunkKind::kFile, c);
    output_on_server += c.shipped - before;
    if (c.over_quota) retry_pass = pass + 3;
    ASSERT_LE(static_cast<int64_t>(server.log.size()), server.quota);
  }
  // Every byte is on the server, reported as dropped, or still to ship.
  EXPECT_EQ(output_on_server + reported + c.dropped + (int64_t(file.size()) - c.read_pos), written);
  EXPECT_GT(reported, 0);
  EXPECT_FALSE(c.over_quota);
  // The marker is there once room came back, with the count, and the newest output after it.
  size_t marker = server.log.find("bytes of this task's output were not shipped");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_NE(server.log.find(Cat("[gpucloud: ", reported, " bytes")), std::string::npos)
      << server.log;
  EXPECT_NE(server.log.find(std::string(36, 'a' + 98 % 26), marker), std::string::npos);
}

// Issue 16: each chunk says when it was read, or when its bytes were all written if that is
// earlier (a backlog shipped after the server was away keeps the time it was written by).
TEST(ShipTimeMs, TheReadTimeOrTheLastWriteWhenThatIsEarlier) {
  struct Case {
    int64_t read_ms;
    std::optional<int64_t> written_by_ms;
    int64_t want;
  };
  for (const Case& c : std::vector<Case>{
           {5'000, std::nullopt, 5'000},  // a marker line, a rotated file's tail: read now
           {5'000, 4'200, 4'200},         // written before this pass: its last write
           {5'000, 5'000, 5'000},
           {5'000, 9'000, 5'000},  // a file touched since (a clock step): never after the read
       }) {
    EXPECT_EQ(ShipTimeMs(c.read_ms, c.written_by_ms), c.want) << c.read_ms;
  }
}

TEST(LogChunkTarget, NamesTheChunksPlaceAndTime) {
  EXPECT_EQ(LogChunkTarget("team-a", "train", 2, 1, 4096, 1'764'657'000'123),
            "/apis/gpucloud/v1/namespaces/team-a/jobs/train/logs?rank=2&attempt=1&offset=4096"
            "&time=1764657000123");
}

}  // namespace
}  // namespace gpucloud::agent
