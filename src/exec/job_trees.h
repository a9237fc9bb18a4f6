// Who owns which of a job's files: the rule every part of the executor and
// the daemon follows, stated once.
//
// The daemon, its launcher and the shims run as root for every user of a
// machine. A folder a user can write is the user's: whatever root finds
// there may be a link, a FIFO, a hard link or a forged record. So:
//
// 1. Root never creates, opens for writing, chowns, chmods, renames or
//    unlinks anything by path inside a folder a user can write.
// 2. What root writes and later trusts (a shim's identity, an exit record
//    and its reservation: everything adoption after a restart reads) lives
//    in the daemon's private tree, <home>/run/jobs/<id>/<attempt>/, which
//    only root can write at every level (core/private_dirs.h checks that,
//    and the launcher makes each folder below it with mkdirat from the
//    checked descriptor).
// 3. What is the job's (its logs, metrics, checkpoints, the fence's ledger
//    and status, its default working folder, pipeline workspaces and
//    artifacts) lives in the user's tree, <home>/jobs/<id>/ and the others,
//    and is created and written by a process that already runs as the
//    job's user, so the kernel's own permission checks apply: the job's
//    process makes its attempt folder and opens its logs after dropping
//    root (shim.cc), and the daemon makes a pipeline's folders in a child
//    that is the user (exec/as_user.h). Root only makes the top folder of a
//    job or run inside a folder only root writes (jobs/, checkpoints/,
//    pipelines/) and hands it over with fchown on the descriptor it holds.
// 4. Where root must read from the user's tree (metrics, logs, the fence's
//    status), it reads through core/safe_file.h: no link followed, no FIFO
//    waited on, a regular file with one link, a bounded amount.
// 5. Signals go only to processes proven to be the job's: the shim named by
//    the private tree (pid and start time, through a pidfd), its session, or
//    the attempt's control group.
#pragma once

#include <cstdint>
#include <string>

namespace gpuherd::exec {

// <records>/<job id>/<attempt>: an attempt's record folder below the private
// base `records` (<home>/run/jobs for the daemon).
std::string AttemptRecordDir(const std::string& records, int64_t job_id, int attempt);

// Splits a record folder into the private base and "<id>/<attempt>";
// false unless its last two names are a positive job id and attempt.
bool SplitAttemptRecordDir(const std::string& record_dir, std::string* base, std::string* relative);

}  // namespace gpuherd::exec
