#include "dist/mpi/mpi_agreement.h"

#include <fmt/core.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"

namespace lt::dist {
namespace {

constexpr int kReportTag = 0x4c54;   // a rank's error for rank 0
constexpr int kVerdictTag = 0x4c55;  // rank 0's verdict for a rank
constexpr int kMaxReport = 2048;     // bytes of one rank's message (longer ones are cut)

using Clock = std::chrono::steady_clock;

// Polls `request` until it completes (true) or `deadline` passes (false, request cancelled).
bool wait_until(MPI_Request& request, Clock::time_point deadline, MPI_Status* status = MPI_STATUS_IGNORE) {
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, status);
    if (done) return true;
    if (Clock::now() >= deadline) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
      return false;
    }
    if (polls > 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string received_text(const std::vector<char>& buffer, const MPI_Status& status) {
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  return std::string(buffer.data(), size_t(std::max(count, 0)));
}

}  // namespace

void mpi_agree(MPI_Comm comm, int rank, int world, const std::string& local_error, double timeout_s) {
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const auto deadline = Clock::now() + seconds(timeout_s);
  const std::string report = local_error.substr(0, kMaxReport);
  if (rank != 0) {
    // Rank 0 may spend the whole timeout waiting for a missing rank before it answers: the others wait
    // twice as long, so that they hear its verdict (naming that rank) rather than time out beside it.
    const auto verdict_deadline = deadline + seconds(timeout_s + 1.0);
    std::vector<char> verdict(size_t(kMaxReport + 128) * size_t(world));
    MPI_Request send, receive;
    MPI_Isend(report.data(), int(report.size()), MPI_CHAR, 0, kReportTag, comm, &send);
    MPI_Irecv(verdict.data(), int(verdict.size()), MPI_CHAR, 0, kVerdictTag, comm, &receive);
    MPI_Status status;
    const bool answered = wait_until(receive, verdict_deadline, &status);
    if (!answered || !wait_until(send, verdict_deadline)) {
      LT_FAIL("rank {}: rank 0 did not answer the agreement step within {} s (it died or is stuck){}", rank,
              2 * timeout_s + 1, report.empty() ? "" : "; this rank's error: " + report);
    }
    const std::string text = received_text(verdict, status);
    if (!text.empty()) LT_FAIL("{}", text);
    return;
  }
  std::vector<std::vector<char>> reports(static_cast<size_t>(world), std::vector<char>(kMaxReport));
  std::vector<MPI_Request> requests(static_cast<size_t>(world), MPI_REQUEST_NULL);
  for (int r = 1; r < world; ++r)
    MPI_Irecv(reports[size_t(r)].data(), kMaxReport, MPI_CHAR, r, kReportTag, comm, &requests[size_t(r)]);
  std::string verdict;
  auto add = [&](const std::string& part) { verdict += (verdict.empty() ? "" : "; ") + part; };
  if (!report.empty()) add(fmt::format("rank 0: {}", report));
  std::vector<int> arrived;
  for (int r = 1; r < world; ++r) {
    MPI_Status status;
    if (!wait_until(requests[size_t(r)], deadline, &status)) {
      add(fmt::format("rank {} did not arrive at the agreement step within {} s (it died or is stuck)", r,
                      timeout_s));
      continue;
    }
    arrived.push_back(r);
    const std::string text = received_text(reports[size_t(r)], status);
    if (!text.empty()) add(fmt::format("rank {}: {}", r, text));
  }
  std::vector<MPI_Request> sends(arrived.size());
  for (size_t i = 0; i < arrived.size(); ++i)
    MPI_Isend(verdict.data(), int(verdict.size()), MPI_CHAR, arrived[i], kVerdictTag, comm, &sends[i]);
  for (MPI_Request& s : sends) wait_until(s, deadline + std::chrono::seconds(1));
  if (!verdict.empty()) LT_FAIL("{}", verdict);
}

}  // namespace lt::dist
